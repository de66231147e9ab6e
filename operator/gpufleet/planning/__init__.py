"""Pure decisions: no Kubernetes, Kopf, Prometheus client or clock (import-linter checks).

Where each thing is decided:
- replicas per tier and weights per class: `planner.plan(spec, observation, previous)`,
  the one entry point (its steps: `feedback`, `classes`, `bounds`, `optimizer` (its
  program's inputs and layout in `program`), `replicas`,
  `stabilization`, `routing`; a preemptible tier's loss rate and margin in `hedging`;
  the replicas a tight objective needs against waits behind prefills in `contention`;
  a loose class's utilization limits over its learned prompt lengths, alone and beside
  another class's, in `waits`; a class's traffic spread over the Ready replicas it has
  to itself in `routing`;
  predictions in `predict`; the reason and message in `explain`);
- each condition: a named check in `conditions` (ready, objectives, metrics, degraded,
  routing);
- class demand and class P99 from per-tier readings: `observed.observe_classes` (with
  `demand`), for the operator and the simulator alike; each class's prompt lengths, and
  the share no tier can serve in time, from the tiers' prompt histograms: `prompts`;
- what a replica can do: `capacity.ReplicaModel`, built by `profiles.replica_model` from the
  built-in table (`profile_data`, derived by tools/derive_profiles.py, fitted by `fitting`)
  or the tier's own profile.
`records` holds the planner's input and output types (Observation, Plan, MetricsReading...);
`inputs` the read-only view of one pass's inputs.
"""
