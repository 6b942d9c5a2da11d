"""Interop with other evaluation tools' formats: a campaign exported as Inspect AI eval logs
(:mod:`anchorage.interop.inspect_logs`) and as a Harbor job folder, and a Harbor job's results imported to be
scored by this project's scorer (:mod:`anchorage.interop.harbor`).

Called by ``anchorage export inspect|harbor`` and ``anchorage import harbor``
(:mod:`anchorage.commands.interop`). Campaigns are read through :mod:`anchorage.report.runs` (a run folder
or an ``s3://`` prefix), never by walking folders by hand.
"""
