"""Whether the Hugging Face Hub can be used, asked once: HF_HUB_OFFLINE, else one short request.

Offline, `datasets` and `huggingface_hub` retry each Hub request for about half a minute with
"Retrying in 8s" lines; `hf-distill quickstart` asks once with a short timeout instead and, when
the Hub does not answer, turns the process offline so no later load retries.
"""

from __future__ import annotations

import os
import threading
import urllib.error
import urllib.request

PROBE_TIMEOUT_S = 3.0


def hub_endpoint() -> str:
    """HF_ENDPOINT as set now (huggingface_hub reads it only at import), else the library's endpoint."""
    from huggingface_hub import constants

    return os.environ.get("HF_ENDPOINT") or constants.ENDPOINT


def hub_problem(endpoint: str | None = None, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """Why the Hub at `endpoint` cannot be reached (one HEAD request, at most `timeout` seconds, name
    lookup included), or None when it answers. Any HTTP answer below 500 (a 404 too) means reachable."""
    url = endpoint or hub_endpoint()
    outcome: list[str | None] = []

    def ask() -> None:
        try:
            urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout).close()
            outcome.append(None)
        except urllib.error.HTTPError as error:  # the Hub answered; 5xx: a proxy or gateway did, not the Hub
            outcome.append(f"{url}: HTTP {error.code} {error.reason}" if error.code >= 500 else None)
        except Exception as error:  # no route, refused, no DNS, TLS, timeout
            reason = getattr(error, "reason", error)
            outcome.append(f"{url}: {reason}" if str(reason) else f"{url}: {type(error).__name__}")

    thread = threading.Thread(target=ask, daemon=True)  # a name lookup ignores the socket timeout
    thread.start()
    thread.join(timeout)
    return outcome[0] if outcome else f"{url}: no answer within {timeout:g} s"


def hub_reachable(endpoint: str | None = None, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """True when the Hub answers one request within `timeout` seconds."""
    return hub_problem(endpoint, timeout) is None


def work_offline() -> None:
    """Turn this process (and the processes it starts) offline for `huggingface_hub`, `transformers` and
    `datasets`: the environment for new processes, the libraries' constants for this one (read at import)."""
    import datasets
    from huggingface_hub import constants

    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    constants.HF_HUB_OFFLINE = True
    datasets.config.HF_HUB_OFFLINE = True
    datasets.config.HF_DATASETS_OFFLINE = True
