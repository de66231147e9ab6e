"""What the operator writes, built from a plan: pure, no I/O (import-linter checks).

- `manifests`: the pool's children (a Deployment and a Service per tier, the HTTPRoute),
  as the server-side-apply bodies the reconciler sends.
- `status`: the pool's whole status from a pass's observation, plan and apply outcome
  (conditions from `gpufleet.planning.conditions`), and the Events that tell what changed.

The reconciler (`gpufleet.reconcile`) does the reads and writes around them; the simulator
builds status with the same code, so its runs carry status exactly as the operator does.
"""
