"""A GPU performance model of vLLM replicas from first principles (pure: numpy and scipy).

hardware: GPU datasheet table. models: model architectures. vllm: vLLM 0.8.5's scheduler
defaults. roofline: one step's time and the KV-cache capacity. engine: an iteration-level
simulation of one replica. workload, ionet, replay: the io.net benchmark runs replayed.
calibration: the fitted efficiencies per GPU type. validate: the replay of every run.
"""
