"""The operator CLI `saga-index` (not part of the Lambda asset)."""
