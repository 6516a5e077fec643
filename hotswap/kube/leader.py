"""Leader election on a ``coordination.k8s.io/v1`` Lease, on the async client.

Same protocol as client-go's ``leaderelection``: a candidate takes the Lease when it is free or expired,
the holder renews it every ``retry_period``, and every write is an optimistic-concurrency PUT (a stale
resourceVersion gets 409, so exactly one candidate wins a race). Expiry is judged on the local monotonic
clock from when *this* process last saw the record change, never by comparing the holder's timestamps
with this replica's wall clock, so clock skew between nodes cannot make two leaders.

The leader is *fenced*: :meth:`LeaderElector.is_leader` turns False as soon as the last successful renewal
is older than ``renew_deadline`` (< lease duration), even before the renew loop notices, and the
actuator checks it right before every write and gives the write a client deadline of at most
:meth:`LeaderElector.time_left`, so no write of this replica is still in flight on its side once a standby can
acquire (at least ``lease_duration`` after the last renewal). What the apiserver does with a request whose client
gave up is beyond any client: this is the usual no-fencing-token limit. When leadership is lost the ``on_lost``
callback fires and the process is expected to exit (the Deployment restarts it as a fresh candidate).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from gke_tpu_priority.hotswap.metrics import Metrics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseSettings:
    name: str
    namespace: str
    identity: str
    lease_duration: float
    renew_deadline: float
    retry_period: float

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline > self.retry_period > 0:
            raise ValueError(
                "lease timings must satisfy leaseDuration > renewDeadline > retryPeriod > 0, got "
                f"{self.lease_duration} / {self.renew_deadline} / {self.retry_period}"
            )


class MicroTime(datetime):
    """A datetime that serialises as Kubernetes MicroTime: always six fractional digits.

    The client serialises datetimes with ``isoformat()``, which drops the fraction when it is zero; the
    apiserver parses MicroTime with a fixed six-digit layout and would reject that.
    """

    def isoformat(self, sep: str = "T", timespec: str = "auto") -> str:
        return self.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def micro_time(moment: datetime) -> MicroTime:
    moment = moment.astimezone(UTC)
    return MicroTime(
        moment.year,
        moment.month,
        moment.day,
        moment.hour,
        moment.minute,
        moment.second,
        moment.microsecond,
        tzinfo=UTC,
    )


class LeaderElector:
    """Acquire, hold and release one Lease."""

    def __init__(
        self,
        api: client.ApiClient,
        settings: LeaseSettings,
        metrics: Metrics,
        *,
        on_lost: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = client.CoordinationV1Api(api)
        self.settings = settings
        self._metrics = metrics
        self._on_lost = on_lost
        self._clock = clock
        self._leader = False
        self._renewed_at = float("-inf")
        self._observed: tuple[str | None, str | None] | None = None
        self._observed_at = float("-inf")
        self._acquired = asyncio.Event()
        self.lost = asyncio.Event()

    # ---- state -------------------------------------------------------------------------------------

    def is_leader(self) -> bool:
        """True only while the lease is held AND was renewed within ``renew_deadline`` (write fence)."""
        return self._leader and self._clock() - self._renewed_at < self.settings.renew_deadline

    def time_left(self) -> float:
        """Seconds until the fence closes (``renew_deadline`` after the last renewal); 0 when not leader."""
        if not self._leader:
            return 0.0
        return max(0.0, self.settings.renew_deadline - (self._clock() - self._renewed_at))

    async def wait_leader(self) -> None:
        await self._acquired.wait()

    # ---- loop --------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Campaign until leader, then renew until leadership is lost (returns) or cancelled."""
        settings = self.settings
        while not self._leader:
            if await self._try_acquire_or_renew():
                self._become_leader()
                break
            await asyncio.sleep(settings.retry_period)
        while True:
            await asyncio.sleep(settings.retry_period)
            if await self._try_acquire_or_renew():
                self._renewed_at = self._clock()
                continue
            if not self.is_leader():
                self._lose("could not renew the lease within renewDeadline")
                return

    def _become_leader(self) -> None:
        self._leader = True
        self._renewed_at = self._clock()
        self._metrics.leader.set(1)
        self._acquired.set()
        log.info("became leader", extra={"lease": self.settings.name, "identity": self.settings.identity})

    def _lose(self, reason: str) -> None:
        was_leader = self._leader
        self._leader = False
        self._metrics.leader.set(0)
        self.lost.set()
        log.error("lost leadership", extra={"lease": self.settings.name, "reason": reason})
        if was_leader and self._on_lost is not None:
            self._on_lost()

    async def _try_acquire_or_renew(self) -> bool:
        settings = self.settings
        now = datetime.now(UTC)
        timeout = settings.retry_period if settings.retry_period >= 1 else 1.0
        try:
            try:
                lease = await self._api.read_namespaced_lease(
                    settings.name, settings.namespace, _request_timeout=timeout
                )
            except ApiException as exc:
                if exc.status != 404:
                    raise
                await self._api.create_namespaced_lease(
                    settings.namespace,
                    client.V1Lease(
                        metadata=client.V1ObjectMeta(name=settings.name, namespace=settings.namespace),
                        spec=self._spec(now, transitions=0, acquire_time=now),
                    ),
                    _request_timeout=timeout,
                )
                return True
            spec = lease.spec or client.V1LeaseSpec()
            holder = spec.holder_identity or None  # "" means released
            observed = (holder, lease.metadata.resource_version)
            if observed != self._observed:
                self._observed, self._observed_at = observed, self._clock()
            duration = spec.lease_duration_seconds or settings.lease_duration
            expired = self._clock() - self._observed_at >= duration
            if holder not in (None, settings.identity) and not expired:
                if self._leader:
                    self._lose(f"lease is held by {holder}")
                return False
            transitions = spec.lease_transitions or 0
            acquire_time = spec.acquire_time
            if holder != settings.identity:
                transitions += 1
                acquire_time = now
            lease.spec = self._spec(now, transitions=transitions, acquire_time=acquire_time)
            # PUT with the read resourceVersion: a concurrent writer makes this 409.
            await self._api.replace_namespaced_lease(settings.name, settings.namespace, lease, _request_timeout=timeout)
            return True
        except ApiException as exc:
            self._metrics.api_error("lease", exc.status)
            log.warning("lease update failed", extra={"status": exc.status, "lease": settings.name})
            return False
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            self._metrics.api_error("lease", None)
            log.warning("lease update failed", extra={"error": f"{type(exc).__name__}: {exc}"[:300]})
            return False

    def _spec(self, now: datetime, *, transitions: int, acquire_time: datetime | None) -> client.V1LeaseSpec:
        return client.V1LeaseSpec(
            holder_identity=self.settings.identity,
            lease_duration_seconds=max(1, round(self.settings.lease_duration)),
            acquire_time=micro_time(acquire_time) if acquire_time is not None else None,
            renew_time=micro_time(now),
            lease_transitions=transitions,
        )

    async def release(self) -> None:
        """Give the lease up on shutdown so a standby takes over at once instead of after expiry."""
        if not self._leader:
            return
        self._leader = False
        self._metrics.leader.set(0)
        settings = self.settings
        try:
            lease = await self._api.read_namespaced_lease(settings.name, settings.namespace, _request_timeout=2.0)
            if lease.spec is None or lease.spec.holder_identity != settings.identity:
                return
            lease.spec.holder_identity = ""
            lease.spec.lease_duration_seconds = 1
            lease.spec.renew_time = micro_time(datetime.now(UTC))
            await self._api.replace_namespaced_lease(settings.name, settings.namespace, lease, _request_timeout=2.0)
            log.info("released the lease", extra={"lease": settings.name})
        except (ApiException, TimeoutError, aiohttp.ClientError, OSError) as exc:
            log.warning("could not release the lease", extra={"error": str(exc)[:300]})
