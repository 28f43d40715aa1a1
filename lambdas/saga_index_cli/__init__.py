"""The operator CLI `saga-index`: a client of the domain library, not part of the Lambda asset."""
