"""Values a user sets, one case per documented option: each is rendered into a golden file."""

from __future__ import annotations

from typing import Any

DIGEST = "sha256:" + "0123456789abcdef" * 4

CASES: dict[str, dict[str, Any]] = {
    "default": {},
    "watch-namespaces": {"watchNamespaces": ["llm", "batch"]},
    "interruption-taints": {
        "interruptionTaints": ["ToBeDeletedByClusterAutoscaler", "example.com/reclaim"]
    },
    "prometheus-url": {
        "prometheus": {
            "url": "http://prometheus-operated.monitoring.svc:9090",
            "scrapeIntervalSeconds": 30,
            "queueCheckSeconds": 5,
        }
    },
    "service-monitor": {
        "serviceMonitor": {
            "enabled": True,
            "interval": "15s",
            "labels": {"release": "kube-prometheus-stack"},
        }
    },
    "pod-monitor": {
        "podMonitor": {
            "enabled": True,
            "interval": "20s",
            "labels": {"release": "kube-prometheus-stack"},
        }
    },
    "vllm-pod-monitor": {
        "prometheus": {
            "scrapeIntervalSeconds": 5,
            "vllmPodMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
        }
    },
    "vllm-pod-monitor-watching": {
        "watchNamespaces": ["llm", "batch"],
        "prometheus": {"vllmPodMonitor": {"enabled": True}},
    },
    "alerts": {
        "serviceMonitor": {"enabled": True},
        "alerts": {
            "enabled": True,
            "labels": {"release": "kube-prometheus-stack"},
            "pageSeverity": "page",
            "ticketSeverity": "ticket",
            "additionalLabels": {"team": "ml-platform"},
        },
    },
    "grafana-dashboard": {
        "grafana": {
            "dashboards": {
                "enabled": True,
                "labels": {"grafana_dashboard": "1", "release": "kube-prometheus-stack"},
                "annotations": {"grafana_folder": "LLM"},
                "namespace": "monitoring",
            }
        }
    },
    "crds-disabled": {"crds": {"enabled": False}},
    "crds-not-kept": {"crds": {"keep": False}},
    "sharded": {"replicaCount": 3, "sharding": {"shards": 6}},
    "kube-api-limits": {"kubeApi": {"qps": 40, "burst": 80}},
    "single-replica-without-leader-election": {
        "replicaCount": 1,
        "leaderElection": {"enabled": False},
    },
    "resources": {
        "resources": {
            "requests": {"cpu": "250m", "memory": "512Mi"},
            "limits": {"cpu": "1", "memory": "1Gi"},
        }
    },
    "image-overrides": {
        "image": {
            "repository": "registry.example.com/ml/gpufleet",
            "tag": "0.1.0-rc1",
            "pullPolicy": "Always",
        },
        "imagePullSecrets": [{"name": "registry-credentials"}],
    },
    "image-digest": {"image": {"digest": DIGEST}},
    "external-service-account-and-rbac": {
        "serviceAccount": {"create": False, "name": "platform-operators"},
        "rbac": {"create": False},
    },
    "names-ports-logging": {
        "nameOverride": "fleet",
        "fullnameOverride": "llm-fleet",
        "leaderElection": {"leaseName": "llm-fleet-leader"},
        "log": {"format": "text", "verbose": True},
        "metricsPort": 9090,
        "healthPort": 9091,
        "service": {"type": "NodePort", "annotations": {"example.com/team": "ml-platform"}},
        "serviceAccount": {
            "annotations": {"iam.gke.io/gcp-service-account": "gpufleet@example.iam"}
        },
    },
    "pool-admission-narrowed": {
        "poolAdmission": {
            "allowedRegistries": ["registry.example.com/ml/", "docker.io/vllm/"],
            "allowedNodeSelectors": ["gpufleet.dev/accelerator=*"],
            "allowedTolerations": ["nvidia.com/gpu:Exists::NoSchedule"],
            "accelerators": {
                "H100-PCIe-80GB": {
                    "nodeSelectors": ["gpufleet.dev/accelerator=h100"],
                    "tolerations": ["nvidia.com/gpu:Exists::NoSchedule"],
                }
            },
        }
    },
    "pool-admission-disabled": {"poolAdmission": {"enabled": False}},
    "scheduling": {
        "podAnnotations": {"example.com/owner": "ml-platform"},
        "podLabels": {"example.com/cost-center": "inference"},
        "priorityClassName": "system-cluster-critical",
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "control"}],
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {
                                "matchLabels": {"app.kubernetes.io/name": "gpufleet"}
                            },
                        },
                    }
                ]
            }
        },
    },
}


def leaves(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted key -> value for every leaf (an empty map or list is a leaf)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(leaves(value, f"{path}."))
        else:
            out[path] = value
    return out
