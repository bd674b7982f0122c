"""Keep the cluster warm or delete it: the cost decision, run cadence and its history."""
