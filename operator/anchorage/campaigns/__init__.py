"""Campaigns: matrix planning, deterministic names, aggregation and the leaderboard (pure)."""
