"""The gke-tpu-priority Pulumi policy pack; policies live in :mod:`policies.rules`."""
