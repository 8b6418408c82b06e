"""Operations routes, no key needed: ``/healthz`` (liveness), ``/readyz`` (store, models
and broker) and ``/metrics`` (Prometheus)."""

from fastapi import APIRouter, Response

from pathweave_api import metrics
from pathweave_api.models import Health, Readiness
from pathweave_api.services import ServicesDep

router = APIRouter()


@router.get("/healthz", response_model=Health, tags=["operations"], summary="Liveness (the process answers)")
def healthz():
    return {"status": "ok"}

@router.get("/readyz", response_model=Readiness, tags=["operations"],
         summary="Readiness: the store answers, the models (and the preloaded tenants' topologies) are loaded, "
                 "the broker (if any) is reachable",
         responses={503: {"model": Readiness, "description": "Not ready (yet)."}})
def readyz(response: Response, svc: ServicesDep):
    runtime = svc.runtime
    base = runtime.connected
    store_ok = False
    detail = svc.warm_error
    if base is not None:
        try:
            base.run("ping")
            store_ok = True
        except Exception as exc:  # noqa: BLE001
            runtime.reset()
            detail = f"store: {type(exc).__name__}"
    elif detail is None:
        detail = "starting: connecting to the store and loading the models"
    dispatcher = svc.dispatcher
    broker = dispatcher.healthy()
    models = runtime.models_loaded(extractor=svc.needs_extractor)
    topologies = svc.topologies_ready
    ready = store_ok and models and topologies and broker is not False
    metrics.READY.set(1 if ready else 0)
    if not ready:
        response.status_code = 503
    if broker is False and detail is None:
        detail = "broker unreachable"
    if not topologies and detail is None:
        detail = "starting: loading the topologies of query.preload_tenants"
    return {"status": "ready" if ready else "unavailable", "store": store_ok, "models": models,
            "queue": dispatcher.mode, "broker": broker, "detail": None if ready else detail}

@router.get("/metrics", tags=["operations"], summary="Prometheus metrics",
         response_class=Response,
         responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                          "description": "Prometheus text format."}})
def prometheus_metrics(svc: ServicesDep):
    depth = svc.dispatcher.depth()
    if depth is not None:
        metrics.QUEUE_DEPTH.set(depth)
    content, media_type = metrics.render(svc.runtime.cache_stats())
    return Response(content, media_type=media_type)
