"""``anchorage view``: a local web viewer of campaign runs (a runs folder or an S3 prefix), served by aiohttp.

Pages (stable URLs, shareable): campaigns → a campaign's leaderboard, per-task tables and trials → an
entry → an entry × task (its seeds side by side) → a trial (outcome, cost and tokens, durations, profile,
price snapshot, the per-metric score table, gates and obligations with their messages, log tails) → its
transcript. The HTML pieces are :mod:`anchorage.report.pages` (the same as ``report.html``); the data
comes from :mod:`anchorage.report.runs` (confined, bounded reads). See :mod:`anchorage.viewer.app`.
"""
