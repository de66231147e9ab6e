"""Pure decisions: no Kubernetes, Kopf, Prometheus client or clock (import-linter checks).

The planner and its parts (time is always an argument):
- `planner.plan(spec, observation, previous) -> model.Plan`: the one entry point.
- `model`: the planner's input and output types (Observation, Plan, MetricsReading...).
- `capacity.ReplicaModel`: latency and capacity of a replica, shared with the simulator;
  `profiles.replica_model(tier, model_spec)` builds it from the built-in table
  (`profile_data`, derived by tools/derive_profiles.py from the io.net runs, fitted by
  `fitting`) or the tier's own profile.
- `optimizer.optimize`: the MILP over replicas and routing; `feedback`, `stabilization`
  and `explain` turn its answer into a stable decision with a reason.
- `demand.infer_demand`: per-class demand from per-tier token rates and live weights;
  `observed.observe_classes` puts it together: demand and P99 per class from what
  Prometheus says per tier, for the operator and the simulator alike.
"""
