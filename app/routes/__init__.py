"""HTTP routers: models, learn, predict and operations (health, readiness, Prometheus)."""
