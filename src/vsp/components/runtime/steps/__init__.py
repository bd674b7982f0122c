"""One entry module per component: what each step does, from its parameters to its outputs."""
