"""Keep the cluster warm, shrink it or delete it: the decision, its inputs, expiry and guards."""
