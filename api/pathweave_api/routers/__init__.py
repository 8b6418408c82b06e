"""The API's routes, one router per resource: documents, jobs, query, records (reasoning
records), operations (health, readiness, metrics). Routers whose limits come from the
settings are built per app (``router(api)``)."""
