"""The admin plane as `sluice serve` runs it: on a listener of its own (the public one
answers 404 for it), and its OpenAPI document valid OpenAPI 3.1 by the specification's own
schema (`openapi-spec-validator`), describing every admin route with the admin key as a
bearer scheme."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from openapi_spec_validator import OpenAPIV31SpecValidator, validate

from conftest import key_sha256, sim_providers

ADMIN = "sk-admin-openapi-0123"
SIM = """
[[models]]
name = "gpt-4o-mini"
"""


def get(url: str, key: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_the_admin_plane_is_apart_and_its_openapi_document_is_valid(start_sim, processes) -> None:
    sim_url, _ = start_sim(SIM)
    key_file = processes.write("openapi-key", "sk-provider-openapi")
    config = processes.write("openapi.toml", f"""
[admin]
key_sha256 = "{key_sha256(ADMIN)}"

[jobs]
path = "{key_file.parent / 'openapi-jobs.redb'}"
{sim_providers(sim_url, str(key_file))}
[[deployments]]
name = "mini"
provider = "sim"
model = "gpt-4o-mini"

[[models]]
name = "fast"
deployment = "mini"
""")
    url, admin, _ = processes.launch_gateway(config)
    assert url != admin
    for path in ["/admin/openapi.json", "/admin/state", "/metrics", "/dashboard"]:
        status, body = get(url + path, ADMIN)
        assert status == 404 and "unknown_route" in body, (path, status, body)
    assert get(admin + "/admin/state", ADMIN)[0] == 200
    assert get(admin + "/metrics")[0] == 200

    status, text = get(admin + "/admin/openapi.json")
    assert status == 200, text
    document = json.loads(text)
    assert document["openapi"] == "3.1.0"
    # Raises, naming the offending part, when the document is not valid OpenAPI 3.1.
    validate(document, cls=OpenAPIV31SpecValidator)
    assert document["components"]["securitySchemes"]["admin_key"] == {"type": "http", "scheme": "bearer"}
    paths = document["paths"]
    for path in ["/admin/state", "/admin/keys", "/admin/keys/{id}", "/admin/usage", "/admin/limits/{kind}/{name}"]:
        assert path in paths, path
    assert not [p for p in paths if not p.startswith("/admin/")], "only the admin API is described"
