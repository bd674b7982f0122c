"""Developer tools, not shipped in the wheel: the runtime lock, the sample report, screenshots."""
