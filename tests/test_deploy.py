"""Deploy files: docker-compose.yml and Dockerfile structure, and that their commands are real.

No Docker engine runs here, so the files are parsed and checked against the CLI and the routes.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import typer.main
import yaml

from app.cli import app as cli_app

ROOT = Path(__file__).resolve().parents[1]
# typer vendors its own click: find its UsageError through a public subclass
UsageError = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")


@pytest.fixture(scope="module")
def compose():
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


@pytest.fixture(scope="module")
def dockerfile():
    """Dockerfile instructions as (KEYWORD, argument) with line continuations joined."""
    text = (ROOT / "Dockerfile").read_text()
    text = re.sub(r"\\\n", " ", text)
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, arg = line.partition(" ")
            out.append((keyword.upper(), arg.strip()))
    return out


def cli_args(command: list[str]) -> list[str]:
    """Check a ``chorus ...`` command parses with the real CLI; return its arguments."""
    assert command[0] == "chorus", command
    group = typer.main.get_command(cli_app)
    ctx = group.make_context("chorus", list(command[1:]), resilient_parsing=False)
    cmd, ctx_args = group, command[1:]
    while hasattr(cmd, "resolve_command"):  # a group: descend to the subcommand
        name, sub, ctx_args = cmd.resolve_command(ctx, list(ctx_args))
        ctx = sub.make_context(name, list(ctx_args), parent=ctx)  # raises on a bad option
        cmd = sub
    return command[1:]


def exec_form(arg: str) -> list[str]:
    return json.loads(arg) if arg.startswith("[") else shlex.split(arg)


def option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


# ----------------------------------------------------------------------- compose


def test_compose_redis_is_durable_on_a_named_volume(compose):
    redis = compose["services"]["redis"]
    cmd = redis["command"]
    cmd = cmd if isinstance(cmd, list) else shlex.split(cmd)
    assert cmd[0] == "redis-server"
    assert option(cmd, "--appendonly") == "yes"
    assert option(cmd, "--appendfsync") in ("everysec", "always")
    (mount,) = redis["volumes"]
    volume, _, target = mount.partition(":")
    assert target == "/data" and volume in compose["volumes"]  # a named volume, not a bind mount
    assert redis["healthcheck"]["test"][-2:] == ["redis-cli", "ping"]


def test_compose_chorus_waits_for_a_healthy_redis_and_points_at_it(compose):
    chorus = compose["services"]["chorus"]
    assert chorus["depends_on"]["redis"]["condition"] == "service_healthy"
    url = chorus["environment"]["CHORUS_REDIS_URL"]
    assert re.fullmatch(r"redis://redis:6379(/\d+)?", url)
    assert chorus["build"] in (".", {"context": "."})
    (port,) = chorus["ports"]
    assert port.split(":")[-1] == "8000"
    test = chorus["healthcheck"]["test"]
    assert test[0] == "CMD" and any("/healthz" in part for part in test)
    assert "127.0.0.1:8000" in " ".join(test)
    for key in chorus["environment"]:
        assert key.startswith("CHORUS_")


def test_environment_names_are_real_settings(compose, dockerfile):
    from app.settings import Settings

    fields = {f"CHORUS_{name.upper()}" for name in Settings.model_fields}
    assert set(compose["services"]["chorus"]["environment"]) <= fields
    env = " ".join(arg for k, arg in dockerfile if k == "ENV")
    assert set(re.findall(r"\b(CHORUS_\w+)=", env)) <= fields
    assert "CHORUS_DATA_DIR=/data" in env and ("VOLUME", '["/data"]') in dockerfile


# ----------------------------------------------------------------------- Dockerfile


def test_dockerfile_base_user_and_numba_cache(dockerfile):
    keywords = [k for k, _ in dockerfile]
    assert dockerfile[0] == ("FROM", "python:3.11-slim")
    users = [arg for k, arg in dockerfile if k == "USER"]
    assert users and users[-1] not in ("root", "0")
    env = " ".join(arg for k, arg in dockerfile if k == "ENV")
    assert "NUMBA_CACHE_DIR=" in env
    # the kernels are compiled after switching to the runtime user (so it owns the cache)
    runs = [i for i, (k, arg) in enumerate(dockerfile) if k == "RUN" and "chorus warmup" in arg]
    assert runs and runs[0] > keywords.index("USER")
    cli_args(["chorus", "warmup"])


def test_dockerfile_cmd_and_healthcheck_match_the_cli_and_routes(dockerfile, tmp_path):
    from app.main import create_app
    from app.settings import Settings

    cmd = exec_form(next(arg for k, arg in dockerfile if k == "CMD"))
    args = cli_args(cmd)
    assert args[0] == "serve" and option(args, "--host") == "0.0.0.0"
    port = option(args, "--port")
    assert ("EXPOSE", port) in dockerfile
    health = next(arg for k, arg in dockerfile if k == "HEALTHCHECK")
    assert f"127.0.0.1:{port}/healthz" in health and "CMD" in health
    service = create_app(Settings(data_dir=tmp_path))
    assert "/healthz" in service.openapi()["paths"]


def test_dockerfile_copies_every_package(dockerfile):
    copied = " ".join(arg for k, arg in dockerfile if k == "COPY")
    for package in ("learners", "ensembles", "app", "pyproject.toml"):
        assert package in copied


def test_cli_args_rejects_unknown_options():
    with pytest.raises(UsageError):
        cli_args(["chorus", "serve", "--no-such-option"])
    with pytest.raises(UsageError, match="no-such-command"):
        cli_args(["chorus", "no-such-command"])
    with pytest.raises(UsageError):
        cli_args(["chorus", "replay"])  # FILE is required


# ----------------------------------------------------------------------- README


def readme_commands() -> list[list[str]]:
    readme = ROOT / "README.md"
    if not readme.exists():
        return []
    commands = []
    blocks, current, lang = [], None, ""
    for line in readme.read_text().splitlines():  # fenced blocks, opening and closing fences paired
        if line.startswith("```"):
            if current is None:
                current, lang = [], line[3:].strip()
            else:
                if lang in ("", "bash", "sh", "console", "shell"):
                    blocks.append("\n".join(current) + "\n")
                current = None
        elif current is not None:
            current.append(line)
    for block in blocks:
        for line in re.sub(r"\\\n", " ", block).splitlines():
            lexer = shlex.shlex(
                line.strip().removeprefix("$ "), posix=True, punctuation_chars=";&|"
            )
            lexer.whitespace_split = True
            words: list[str] = []
            for token in [*lexer, ";"]:  # split at &&, ;, | (shell operators outside quotes)
                if token and set(token) <= set(";&|"):
                    if words[:1] == ["chorus"]:
                        commands.append(words)
                    words = []
                else:
                    words.append(token)
    return commands


@pytest.mark.skipif(not (ROOT / "README.md").exists(), reason="README.md not written yet")
def test_readme_chorus_commands_parse_and_include_serve():
    commands = readme_commands()
    assert any(c[1:2] == ["serve"] for c in commands), "README shows no `chorus serve`"
    for command in commands:
        cli_args(command)


# ----------------------------------------------------------------------- cluster compose


@pytest.fixture(scope="module")
def cluster_compose():
    return yaml.safe_load((ROOT / "docker-compose.cluster.yml").read_text())


def _command(service: dict) -> list[str]:
    cmd = service["command"]
    return cmd if isinstance(cmd, list) else shlex.split(cmd)


def _masters(compose: dict) -> dict[str, dict]:
    return {
        name: s
        for name, s in compose["services"].items()
        if "command" in s and _command(s)[:1] == ["redis-server"]
    }


def test_cluster_compose_has_three_durable_cluster_masters(cluster_compose):
    masters = _masters(cluster_compose)
    assert len(masters) == 3
    volumes = set()
    for name, s in masters.items():
        cmd = _command(s)
        assert option(cmd, "--cluster-enabled") == "yes"
        assert option(cmd, "--cluster-require-full-coverage") == "no"  # a lost master: its slots
        assert option(cmd, "--cluster-announce-hostname") == name  # clients reach it by name
        assert option(cmd, "--appendonly") == "yes"
        assert option(cmd, "--appendfsync") in ("everysec", "always")
        (mount,) = s["volumes"]
        volume, _, target = mount.partition(":")
        assert target == "/data" and volume in cluster_compose["volumes"]
        volumes.add(volume)
        assert s["healthcheck"]["test"][-2:] == ["redis-cli", "ping"]
    assert len(volumes) == 3  # one volume each


def test_cluster_compose_creates_the_cluster_once_after_the_masters(cluster_compose):
    create = cluster_compose["services"]["cluster-create"]
    masters = _masters(cluster_compose)
    assert {k: v["condition"] for k, v in create["depends_on"].items()} == {
        m: "service_healthy" for m in masters
    }
    script = " ".join(_command(create))
    assert "redis-cli --cluster create" in script and "--cluster-replicas 0" in script
    assert "--cluster-yes" in script and "cluster_state:ok" in script
    for m in masters:
        assert f"getent hosts {m} " in script
    assert create["restart"] == "no"


def test_cluster_compose_chorus_instances_point_at_every_master(cluster_compose):
    from app.settings import Settings
    from app.stores.redis_cluster import is_cluster_url, parse_cluster_url

    masters = _masters(cluster_compose)
    chorus = {n: s for n, s in cluster_compose["services"].items() if n.startswith("chorus")}
    assert len(chorus) == 2
    fields = {f"CHORUS_{name.upper()}" for name in Settings.model_fields}
    for s in chorus.values():
        env = s["environment"]
        assert set(env) <= fields
        url = env["CHORUS_REDIS_URL"]
        assert is_cluster_url(url)
        assert parse_cluster_url(url)["startup_nodes"] == [(m, 6379) for m in sorted(masters)]
        assert env["CHORUS_SHARED_STORE"] == "true"  # several writers: the lease
        Settings(redis_url=url, shared_store=env["CHORUS_SHARED_STORE"])
        assert s["depends_on"] == {
            "cluster-create": {"condition": "service_completed_successfully"}
        }
        assert s["build"] in (".", {"context": "."})
        test = s["healthcheck"]["test"]
        assert test[0] == "CMD" and "127.0.0.1:8000/readyz" in " ".join(test)


def test_cluster_compose_nginx_balances_every_instance(cluster_compose, dockerfile):
    nginx = cluster_compose["services"]["nginx"]
    chorus = sorted(n for n in cluster_compose["services"] if n.startswith("chorus"))
    (mount,) = nginx["volumes"]
    source, target = mount.split(":")[:2]
    conf = (ROOT / source).read_text()
    assert target == "/etc/nginx/conf.d/default.conf"
    port = exec_form(next(arg for k, arg in dockerfile if k == "CMD"))
    port = option(port, "--port")
    upstream = re.search(r"upstream (\w+) \{(.*?)\}", conf, re.S)
    assert upstream is not None
    servers = re.findall(r"^\s*server ([\w.-]+):(\d+)", upstream.group(2), re.M)
    assert servers == [(n, port) for n in chorus]
    assert f"proxy_pass http://{upstream.group(1)};" in conf
    listen = re.search(r"listen (\d+);", conf).group(1)
    (published,) = nginx["ports"]
    assert published.split(":")[-1] == listen
    assert {k: v["condition"] for k, v in nginx["depends_on"].items()} == {
        n: "service_healthy" for n in chorus
    }


# --------------------------------------------------------------------- the balancer, for real
class _Backend:
    """A stand-in instance: answers every request with its own name and records the route
    header it was sent."""

    def __init__(self, name: str) -> None:
        import http.server
        import threading

        seen = self.seen = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                seen.append(self.headers.get("X-Chorus-Model"))
                body = json.dumps({"instance": name, "prediction": None, "probabilities": {}})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())

            do_GET = do_POST = _answer

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def balancer(tmp_path):
    """The deploy's nginx config, run by a real nginx, in front of two stand-in instances."""
    import shutil

    from app.testing import DeployNginx

    if shutil.which("nginx") is None and not Path("/usr/sbin/nginx").exists():
        pytest.skip("nginx is not installed (bash .ci/test installs it)")
    backends = [_Backend("chorus-1"), _Backend("chorus-2")]
    nginx = DeployNginx([b.port for b in backends], tmp_path / "nginx")
    try:
        nginx.start()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    yield nginx.url, backends
    nginx.stop()
    for b in backends:
        b.server.shutdown()


def test_balancer_routes_each_model_to_one_instance(balancer):
    """Requests about one model reach one instance, however the model is named (header, query,
    path); different models spread over both instances."""
    import httpx

    url, _ = balancer
    where = {}
    with httpx.Client(base_url=url, trust_env=False) as c:
        for k in range(40):
            name = f"user-{k}.duration"
            got = {
                c.post("/learn", json={"model": name}, headers={"X-Chorus-Model": name}).json()[
                    "instance"
                ]
                for _ in range(3)
            }
            got.add(c.get("/predict", params={"model": name, "a": 1}).json()["instance"])
            got.add(c.get(f"/models/{name}/metrics").json()["instance"])
            assert len(got) == 1, (name, got)
            where[name] = got.pop()
        spread = {c.get("/models").json()["instance"] for _ in range(40)}
    assert set(where.values()) == {"chorus-1", "chorus-2"}
    assert spread == {"chorus-1", "chorus-2"}  # no model named: spread at random


def test_client_names_the_model_for_the_balancer(balancer):
    from app.client import ChorusClient

    url, backends = balancer
    with ChorusClient(url, retries=0) as client:
        client.predict("calendar-7", {"a": 1.0})
    assert "calendar-7" in [h for b in backends for h in b.seen]
