"""Vertex AI training clusters: specs, validation, requests, operations, labels.

Sources cited in this package's docstrings by tag:

- [R CREATE]: Google's create-cluster page, https://docs.cloud.google.com/gemini-enterprise-agent-platform/machine-learning/training/training-clusters/create-cluster
- [R MANAGE]: the manage-cluster page, https://docs.cloud.google.com/gemini-enterprise-agent-platform/machine-learning/training/training-clusters/manage-cluster
- [R RESIL]: the cluster-resiliency page, https://docs.cloud.google.com/gemini-enterprise-agent-platform/machine-learning/training/training-clusters/cluster-resiliency
- [R MM]: the Terraform (magic-modules) resource definition,
  https://github.com/GoogleCloudPlatform/magic-modules/blob/main/mmv1/products/vertexai/ModelDevelopmentCluster.yaml
- [3P]: found only in public third-party code (a training-cluster sample that renders the
  cluster JSON), not in Google's documentation; kept where the API would otherwise fail late.
"""
