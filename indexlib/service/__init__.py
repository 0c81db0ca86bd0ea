"""`skipindex serve`: an Iceberg REST catalog in front of the configured one whose server-side scan planning
(`plan`, `tasks`) is answered from the index, so any engine that plans through the REST catalog prunes with it.

app.py is the HTTP surface (routes, auth, limits, errors), planner.py decides how each plan is made (the index, or
pyiceberg's own planning where the index cannot answer), wire.py turns files into the specification's models,
errors.py maps failures to its ErrorModel, metrics.py counts what was served.
"""
