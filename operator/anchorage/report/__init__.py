"""Reports: leaderboard tables, plots and the self-contained HTML report."""
