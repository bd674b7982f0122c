"""The Model Registry: uploads, versions and aliases."""
