"""kopf handlers for Trial, ScoringRun and VerificationCampaign (thin: parse, call the core, write status)."""
