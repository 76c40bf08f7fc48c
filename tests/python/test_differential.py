"""Differential conformance: what sluice puts on the wire to a provider, against what the
provider's own SDK puts there for the same logical request.

For each provider kind (Azure classic and v1, Bedrock Converse and InvokeModel, Gemini,
Vertex for Gemini and for Claude) a recording pass-through (`wire_capture.Capture`) sits in
front of the simulated provider. For each logical request of the catalogue below:

1. the **oracle**: the provider's official SDK sends it to the capture server directly
   (boto3 `bedrock-runtime` with SigV4, google-genai with an API key or Vertex credentials,
   `AnthropicVertex`, `AzureOpenAI`, `openai.OpenAI` on Azure's v1 surface);
2. the same logical request goes through sluice from each client protocol sluice serves
   (OpenAI chat, Anthropic Messages, and the provider's native surface pointed at sluice),
   sluice's deployment being the capture server;
3. the two upstream requests are compared field by field (`wire_view`): method, path,
   query, authentication structure, the other headers, and the JSON body after the named
   normalizations in `normalize_body`. The SDKs are the oracles: no expected body is
   written here.
4. What the client SDK got back is compared with what the provider's SDK got from the
   provider: for streams on every protocol (`summary`: text, tool calls, reasoning and its
   signature's presence, usage, stop reason), and on the native surface the whole answer or
   every stream event as the SDK's own objects (`answer`, `normalize_events`: ids, dates,
   latencies and the simulator's per-answer reasoning wording blanked).

Each (provider, feature, client protocol) cell gets an outcome — `same` (native surface,
identical upstream request), `translated` (another protocol, identical upstream request and
answer), `refused` (a 4xx naming the field, nothing sent upstream), `n/a` (the protocol or
provider has no such feature; the reason is in the table) or `differs` — written to
`target/fidelity.json`; `scripts/fidelity-table` renders `docs/fidelity.md` from it. A
`differs` fails the test unless ALLOWED lists it with its reason; an ALLOWED or REFUSED
entry that no longer happens fails too, so both lists stay true.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import anthropic
import boto3
import openai
import pytest
from botocore.config import Config
from conftest import REPO_ROOT, key_sha256
from test_bedrock_inbound import certificate
from test_google_sdk import key_pair
from wire_capture import Capture, Recorded, auth_view, header_view

# The oracle names the simulator's Claude model, which the anthropic SDK knows as retiring.
pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

KEY = "sk-differential-acme"
AZURE_KEY = "azure-differential-key"
GEMINI_KEY = "AIza-sim-differential"
ACCOUNT = "sluice-diff@acme-ai.iam.gserviceaccount.com"
ACCESS_KEY_ID = "AKIDSLUICESIMULATED"
SECRET_ACCESS_KEY = "sluice-simulated-secret-access-key"
BEDROCK_MODEL = "anthropic.claude-3-7-sonnet-20250219-v1:0"
CLAUDE_VERTEX = "claude-sonnet-4-5"
GEMINI = "gemini-2.5-flash"
GEMINI3 = "gemini-3-flash-preview"
AZURE_DEPLOYMENT = "gpt4o-east"
AZURE_EMBED = "embed-east"
AZURE_API_VERSION = "2025-04-01-preview"

OUT = REPO_ROOT / "target" / "fidelity.json"

PROVIDERS = {
    "azure-classic": "Azure OpenAI, classic surface (`/openai/deployments/{d}/…?api-version`)",
    "azure-v1": "Azure OpenAI, v1 surface (`/openai/v1/…`)",
    "bedrock-converse": "AWS Bedrock, Converse / ConverseStream",
    "bedrock-invoke": "AWS Bedrock, InvokeModel / InvokeModelWithResponseStream (Claude)",
    "gemini": "Gemini API, native (`generateContent`)",
    "vertex-gemini": "Vertex AI, Gemini (`publishers/google`)",
    "vertex-claude": "Vertex AI, Claude (`publishers/anthropic`, `rawPredict`)",
}
PROTOCOLS = ("openai", "anthropic", "native")

# Known differences between what sluice sends (or hands back) and what the SDK does, each
# a documented choice or limitation: (provider pattern, protocol pattern, pattern of the
# difference line, why). A case whose every difference is listed here is recorded as
# `differs` with the reason; any other difference fails. An entry no case needs any more
# fails `test_every_allowed_difference_still_happens`.
ALLOWED: list[tuple[str, str, str, str]] = [
    (
        "azure-v1", ".*", r"^\.auth\.(api-key|bearer):",
        "sluice sends the Azure key in `api-key` on both surfaces; the OpenAI client on the v1 surface sends it as "
        "`Authorization: Bearer`. Azure's v1 API takes either "
        "(https://learn.microsoft.com/en-us/azure/ai-services/openai/api-version-lifecycle, API key authentication).",
    ),
    (
        "vertex-claude", ".*", r"^\.body\.anthropic_version:",
        "sluice sends `anthropic_version: vertex-2023-10-16`, the value Anthropic and Google document for Vertex "
        "(https://docs.anthropic.com/en/api/claude-on-vertex-ai); AnthropicVertex sends its own API version date. "
        "Vertex accepts both.",
    ),
    (
        "gemini|vertex-gemini", "anthropic", r"^\.body\.generationConfig\.thinkingConfig\.includeThoughts: sluice adds true",
        "An Anthropic client that enables `thinking` reads the thinking back: sluice asks Gemini for its thought "
        "summaries (`includeThoughts`), which reach the client as `thinking` blocks "
        "(https://ai.google.dev/gemini-api/docs/thinking#summaries; docs/operations.md, Thought signatures).",
    ),
    (
        "gemini|vertex-gemini", "native", r"^native answer(\[\d+\])?\.usage_metadata",
        "sluice re-renders Gemini's answer from the OpenAI chat shape its road carries: `usageMetadata` has no "
        "per-modality `promptTokensDetails`, and in a stream it comes on the last chunk only (Gemini also sends the "
        "prompt count on every chunk). The token counts the client reads are the same.",
    ),
]
_allowed_used: set[int] = set()


# (provider, feature, protocol) -> the refusal sluice answers instead of translating, and
# why (each is also in docs/operations.md's refused-fields table).
NO_RESPONSES = "Gemini's native API has no Responses counterpart: 400 (docs/operations.md, the protocol matrix)"
REFUSED: dict[tuple[str, str, str], str] = {
    **{(p, "responses", "openai"): NO_RESPONSES for p in ("gemini", "vertex-gemini")},
}

# ---------------------------------------------------------------------------------------
# The simulated provider, the capture server in front of it, and the gateways.

SIM_MODELS = [
    (BEDROCK_MODEL, 'shape = "anthropic"\nflavor = "bedrock"'),
    (CLAUDE_VERTEX, 'shape = "anthropic"'),
    (GEMINI, 'flavor = "gemini"'),
    (GEMINI3, 'flavor = "gemini"'),
    (AZURE_DEPLOYMENT, 'flavor = "azure"'),
]
SIM = "seed = 29\n" + "".join(
    f'[[models]]\nname = "{name}"\n{extra}\ncompletion = {{ dist = "fixed", tokens = 6 }}\n\n' for name, extra in SIM_MODELS
) + f"""[[models]]
name = "{AZURE_EMBED}"
flavor = "azure"
embedding_dims = 8

[google]
api_keys = ["{GEMINI_KEY}"]
service_accounts = [{{ client_email = "{ACCOUNT}", public_key_pem = PUBLIC_PEM }}]
"""


def gateway_config(capture: str, files: dict[str, Path], tls: tuple[Path, Path] | None) -> str:
    server = f'tls_cert = "{tls[0]}"\ntls_key = "{tls[1]}"' if tls else ""
    profiles = {
        "az-chat": "az-classic", "az-embed": "az-classic-embed", "v1-chat": "az-v1", "v1-embed": "az-v1-embed",
        "br-converse": "br-converse", "br-invoke": "br-invoke", "gemini": "gemini", "gemini3": "gemini3",
        "vx-gemini": "vx-gemini", "vx-gemini3": "vx-gemini3", "vx-claude": "vx-claude",
    }
    models = "".join(f'\n[[models]]\nname = "{p}"\ndeployment = "{d}"\n' for p, d in profiles.items())
    return f"""
[server]
listen = "127.0.0.1:0"
{server}

[jobs]
path = "{files['jobs']}"

[[providers]]
name = "az-classic"
kind = "azure"
base_url = "{capture}"
api_version = "{AZURE_API_VERSION}"
api_key_file = "{files['azure_key']}"

[[providers]]
name = "az-v1"
kind = "azure"
api_surface = "v1"
base_url = "{capture}"
api_key_file = "{files['azure_key']}"

[[providers]]
name = "br-converse"
kind = "bedrock"
base_url = "{capture}"
region = "us-east-1"
aws_credentials_file = "{files['aws']}"

[[providers]]
name = "br-invoke"
kind = "bedrock"
bedrock_api = "invoke"
base_url = "{capture}"
region = "us-east-1"
aws_credentials_file = "{files['aws']}"

[[providers]]
name = "gemini"
kind = "gemini"
api_surface = "native"
base_url = "{capture}"
api_key_file = "{files['gemini_key']}"

[[providers]]
name = "vx-google"
kind = "vertex"
project = "acme-ai"
region = "us-east5"
base_url = "{capture}"
service_account_file = "{files['account']}"

[[providers]]
name = "vx-anthropic"
kind = "vertex"
publisher = "anthropic"
project = "acme-ai"
region = "us-east5"
base_url = "{capture}"
service_account_file = "{files['account']}"

[[deployments]]
name = "az-classic"
provider = "az-classic"
model = "gpt-4o"
azure_deployment = "{AZURE_DEPLOYMENT}"

[[deployments]]
name = "az-classic-embed"
provider = "az-classic"
model = "{AZURE_EMBED}"

[[deployments]]
name = "az-v1"
provider = "az-v1"
model = "{AZURE_DEPLOYMENT}"

[[deployments]]
name = "az-v1-embed"
provider = "az-v1"
model = "{AZURE_EMBED}"

[[deployments]]
name = "br-converse"
provider = "br-converse"
model = "{BEDROCK_MODEL}"

[[deployments]]
name = "br-invoke"
provider = "br-invoke"
model = "{BEDROCK_MODEL}"

[[deployments]]
name = "gemini"
provider = "gemini"
model = "{GEMINI}"

[[deployments]]
name = "gemini3"
provider = "gemini"
model = "{GEMINI3}"

[[deployments]]
name = "vx-gemini"
provider = "vx-google"
model = "{GEMINI}"

[[deployments]]
name = "vx-gemini3"
provider = "vx-google"
model = "{GEMINI3}"

[[deployments]]
name = "vx-claude"
provider = "vx-anthropic"
model = "{CLAUDE_VERTEX}"
{models}
[[tenants]]
name = "acme"

[[keys]]
id = "acme-key"
tenant = "acme"
sha256 = "{key_sha256(KEY)}"
"""


@dataclass
class Env:
    sim: str
    capture: Capture
    gateway: str  # plain http: OpenAI, Anthropic, Google and Azure clients
    tls_gateway: str  # https: boto3 with a bearer token (botocore sends one over TLS only)
    cert: Path
    account: str  # the service-account key file (its token_uri is the simulator's)


@pytest.fixture(scope="module")
def env(start_sim, processes) -> Iterator[Env]:
    private, public = key_pair()
    sim, _ = start_sim(SIM.replace("PUBLIC_PEM", json.dumps(public)))
    capture = Capture(sim)
    info = {
        "type": "service_account", "project_id": "acme-ai", "private_key_id": "k1", "private_key": private,
        "client_email": ACCOUNT, "token_uri": f"{sim}/token",
    }
    files = {
        "account": processes.write("diff-sa.json", json.dumps(info)),
        "azure_key": processes.write("diff-azure-key", AZURE_KEY),
        "gemini_key": processes.write("diff-gemini-key", GEMINI_KEY),
        "aws": processes.write(
            "diff-aws", f"[default]\naws_access_key_id = {ACCESS_KEY_ID}\naws_secret_access_key = {SECRET_ACCESS_KEY}\n"
        ),
    }
    cert = certificate(files["account"].parent)
    urls = []
    for name, tls in (("plain", None), ("tls", cert)):
        files["jobs"] = files["account"].parent / f"diff-jobs-{name}.redb"
        config = processes.write(f"gateway-diff-{name}.toml", gateway_config(capture.url, files, tls))
        url, _ = processes.launch(["serve", "--config", str(config)], prefix="sluice listening on ")
        urls.append(url)
    yield Env(sim, capture, urls[0], urls[1], cert[0], str(files["account"]))
    capture.stop()


# ---------------------------------------------------------------------------------------
# Clients.


def bedrock_oracle(env: Env) -> contextlib.AbstractContextManager:
    """A `bedrock-runtime` client signing with SigV4 (the simulator's key pair), on the
    capture server (`with bedrock_oracle(env) as client`, like `bedrock_to_sluice`)."""
    return contextlib.nullcontext(_sigv4_client(env))


def _sigv4_client(env: Env):
    return boto3.client(
        "bedrock-runtime", region_name="us-east-1", endpoint_url=env.capture.url,
        aws_access_key_id=ACCESS_KEY_ID, aws_secret_access_key=SECRET_ACCESS_KEY,
        config=Config(retries={"max_attempts": 1, "mode": "standard"}),
    )


class bedrock_to_sluice:
    """A `bedrock-runtime` client on sluice with the sluice key as a Bedrock API key, which
    botocore reads from `AWS_BEARER_TOKEN_BEDROCK` when it sends: the variable is set, and
    SigV4 credentials hidden, while the calls run (`with bedrock_to_sluice(env) as client`)."""

    NAMES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK")

    def __init__(self, env: Env) -> None:
        self.env = env

    def __enter__(self):
        self.saved = {k: os.environ.pop(k, None) for k in self.NAMES}
        os.environ["AWS_BEARER_TOKEN_BEDROCK"] = KEY
        return boto3.client(
            "bedrock-runtime", region_name="us-east-1", endpoint_url=self.env.tls_gateway, verify=str(self.env.cert),
            config=Config(retries={"max_attempts": 1, "mode": "standard"}),
        )

    def __exit__(self, *exc: Any) -> None:
        os.environ.pop("AWS_BEARER_TOKEN_BEDROCK", None)
        os.environ.update({k: v for k, v in self.saved.items() if v is not None})


def openai_to_sluice(env: Env) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{env.gateway}/v1", api_key=KEY, max_retries=0)


def anthropic_to_sluice(env: Env) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=env.gateway, api_key=KEY, max_retries=0)


def genai(base_url: str, *, vertex: bool = False, credentials: Any = None, key: str | None = None):
    from google import genai as g
    from google.genai import types

    no_retry = types.HttpRetryOptions(attempts=1)
    if vertex:
        # api_version v1: the GA surface sluice calls (google-genai's Vertex default is v1beta1).
        options = types.HttpOptions(base_url=base_url, api_version="v1", retry_options=no_retry)
        return g.Client(vertexai=True, project="acme-ai", location="us-east5", credentials=credentials, http_options=options)
    options = types.HttpOptions(base_url=base_url, api_version="v1beta", retry_options=no_retry)
    return g.Client(api_key=key, http_options=options)


def service_account(env: Env):
    from google.oauth2 import service_account as sa

    return sa.Credentials.from_service_account_file(env.account, scopes=["https://www.googleapis.com/auth/cloud-platform"])


def sluice_vertex_credentials():
    from google.oauth2.credentials import Credentials

    return Credentials(token=KEY)


def azure_oracle(env: Env, surface: str):
    if surface == "azure-classic":
        return openai.AzureOpenAI(azure_endpoint=env.capture.url, api_key=AZURE_KEY, api_version=AZURE_API_VERSION, max_retries=0)
    return openai.OpenAI(base_url=f"{env.capture.url}/openai/v1", api_key=AZURE_KEY, max_retries=0)


def azure_to_sluice(env: Env, surface: str):
    if surface == "azure-classic":
        return openai.AzureOpenAI(azure_endpoint=env.gateway, api_key=KEY, api_version=AZURE_API_VERSION, max_retries=0)
    return openai.OpenAI(base_url=f"{env.gateway}/openai/v1", api_key=KEY, max_retries=0)


# ---------------------------------------------------------------------------------------
# The logical requests, in each protocol's words.

SYSTEM = "be brief"
HELLO = "Say hi"
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)
PNG_B64 = base64.b64encode(PNG).decode()
LOOK = "What is in this image?"
ASK = "Weather in Paris? call-tool:get_weather"
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}
TOOL_DOC = "The weather of a city"
CALL_ID = "toolu_diff_1"
CALL_ARGS = {"city": "Paris"}
RESULT = "sunny"
BETA = "context-1m-2025-08-07"
THINKING = {"type": "enabled", "budget_tokens": 1024}
CACHED = "Follow these house rules carefully."


def oa_tools() -> list[dict]:
    return [{"type": "function", "function": {"name": "get_weather", "description": TOOL_DOC, "parameters": SCHEMA}}]


def an_tools() -> list[dict]:
    return [{"name": "get_weather", "description": TOOL_DOC, "input_schema": SCHEMA}]


def oa_messages(feature: str) -> list[dict]:
    if feature in ("text", "stream"):
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": HELLO}]
    if feature == "image":
        url = f"data:image/png;base64,{PNG_B64}"
        return [{"role": "user", "content": [{"type": "text", "text": LOOK}, {"type": "image_url", "image_url": {"url": url}}]}]
    if feature == "tools":
        call = {"id": CALL_ID, "type": "function", "function": {"name": "get_weather", "arguments": json.dumps(CALL_ARGS)}}
        return [
            {"role": "user", "content": ASK},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": CALL_ID, "content": RESULT},
        ]
    raise KeyError(feature)


def an_messages(feature: str, signed: dict | None = None) -> list[dict]:
    if feature in ("text", "stream", "beta", "cache", "responses"):
        return [{"role": "user", "content": HELLO}]
    if feature == "image":
        image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}}
        return [{"role": "user", "content": [{"type": "text", "text": LOOK}, image]}]
    if feature in ("tools", "thinking"):
        call_id = signed["id"] if signed else CALL_ID
        call = {"type": "tool_use", "id": call_id, "name": "get_weather", "input": signed["input"] if signed else CALL_ARGS}
        thought = [{"type": "thinking", "thinking": signed["thinking"], "signature": signed["signature"]}] if signed else []
        return [
            {"role": "user", "content": ASK},
            {"role": "assistant", "content": [*thought, call]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": RESULT}]},
        ]
    if feature == "stream-thinking":
        return [{"role": "user", "content": ASK}]
    raise KeyError(feature)


def an_params(feature: str, signed: dict | None = None) -> dict:
    """The Anthropic Messages parameters of a feature (shared by the anthropic SDK to
    sluice, AnthropicVertex and InvokeModel's body)."""
    params: dict[str, Any] = {"max_tokens": 20, "messages": an_messages(feature, signed)}
    if feature in ("text", "stream"):
        params["system"] = SYSTEM
    if feature == "cache":
        params["system"] = [{"type": "text", "text": CACHED, "cache_control": {"type": "ephemeral"}}]
    if feature in ("tools", "thinking", "stream-thinking"):
        params["tools"] = an_tools()
    if feature in ("thinking", "stream-thinking"):
        params["thinking"] = THINKING
        params["max_tokens"] = 2048
    return params


def cv_messages(feature: str, signed: dict | None = None) -> list[dict]:
    """Converse's words for the same messages."""
    if feature in ("text", "stream", "beta", "cache"):
        return [{"role": "user", "content": [{"text": HELLO}]}]
    if feature == "image":
        return [{"role": "user", "content": [{"text": LOOK}, {"image": {"format": "png", "source": {"bytes": PNG}}}]}]
    if feature in ("tools", "thinking"):
        call_id = signed["id"] if signed else CALL_ID
        use = {"toolUse": {"toolUseId": call_id, "name": "get_weather", "input": signed["input"] if signed else CALL_ARGS}}
        thought = (
            [{"reasoningContent": {"reasoningText": {"text": signed["thinking"], "signature": signed["signature"]}}}]
            if signed else []
        )
        return [
            {"role": "user", "content": [{"text": ASK}]},
            {"role": "assistant", "content": [*thought, use]},
            {"role": "user", "content": [{"toolResult": {"toolUseId": call_id, "content": [{"text": RESULT}]}}]},
        ]
    if feature == "stream-thinking":
        return [{"role": "user", "content": [{"text": ASK}]}]
    raise KeyError(feature)


def cv_params(feature: str, signed: dict | None = None) -> dict:
    params: dict[str, Any] = {"messages": cv_messages(feature, signed), "inferenceConfig": {"maxTokens": 20}}
    if feature in ("text", "stream"):
        params["system"] = [{"text": SYSTEM}]
    if feature == "cache":
        params["system"] = [{"text": CACHED}, {"cachePoint": {"type": "default"}}]
    if feature == "beta":
        params["additionalModelRequestFields"] = {"anthropic_beta": [BETA]}
    if feature in ("tools", "thinking", "stream-thinking"):
        spec = {"name": "get_weather", "description": TOOL_DOC, "inputSchema": {"json": SCHEMA}}
        params["toolConfig"] = {"tools": [{"toolSpec": spec}]}
    if feature in ("thinking", "stream-thinking"):
        params["additionalModelRequestFields"] = {"thinking": THINKING}
        params["inferenceConfig"] = {"maxTokens": 2048}
    return params


def invoke_body(feature: str, signed: dict | None = None) -> str:
    body = {"anthropic_version": "bedrock-2023-05-31", **an_params(feature, signed)}
    if feature == "beta":
        body["anthropic_beta"] = [BETA]
    return json.dumps(body)


def gm_contents(feature: str, signed: dict | None = None):
    from google.genai import types

    if feature in ("text", "stream", "effort"):
        return [types.Content(role="user", parts=[types.Part.from_text(text=HELLO)])]
    if feature == "image":
        return [types.Content(role="user", parts=[types.Part.from_text(text=LOOK), types.Part.from_bytes(data=PNG, mime_type="image/png")])]
    if feature in ("tools", "thinking"):
        call = types.Part.from_function_call(name="get_weather", args=CALL_ARGS)
        if signed:
            call = types.Part(function_call=types.FunctionCall(name="get_weather", args=signed["input"]),
                              thought_signature=signed["signature"])
        answer = types.Part.from_function_response(name="get_weather", response={"result": RESULT})
        return [
            types.Content(role="user", parts=[types.Part.from_text(text=ASK)]),
            types.Content(role="model", parts=[call]),
            types.Content(role="user", parts=[answer]),
        ]
    raise KeyError(feature)


def gm_config(feature: str):
    from google.genai import types

    config: dict[str, Any] = {"max_output_tokens": 20}
    if feature in ("text", "stream"):
        config["system_instruction"] = SYSTEM
    if feature in ("tools", "thinking"):
        decl = types.FunctionDeclaration(name="get_weather", description=TOOL_DOC, parameters_json_schema=SCHEMA)
        config["tools"] = [types.Tool(function_declarations=[decl])]
    if feature == "effort":
        # 1,024 tokens: `reasoning_effort: "low"` in Google's OpenAI compatibility table
        # (https://ai.google.dev/gemini-api/docs/openai).
        config["thinking_config"] = types.ThinkingConfig(thinking_budget=1024)
    return types.GenerateContentConfig(**config)


# ---------------------------------------------------------------------------------------
# What each client got back, as comparable summaries.

STOP = {
    "end_turn": "end", "stop": "end", "STOP": "end", "FinishReason.STOP": "end",
    "tool_use": "tool", "tool_calls": "tool",
    "max_tokens": "length", "length": "length", "MAX_TOKENS": "length", "FinishReason.MAX_TOKENS": "length",
}


def summary(text: str = "", tools: list | None = None, reasoning: list | None = None, stop: Any = None,
            usage: tuple | None = None) -> dict:
    """What a client can see of an answer, in one vocabulary: the text, the tool calls
    (name, arguments), the reasoning (whether it has text, its signature's presence), the
    stop reason and the usage (input, output)."""
    return {
        "text": text,
        "tools": tools or [],
        "reasoning": reasoning or [],
        "stop": STOP.get(str(stop), str(stop)),
        "usage": usage,
    }


def converse_stream_summary(events: list[dict]) -> dict:
    text, tools, reasoning, stop, usage = "", {}, {}, None, None
    for e in events:
        if "contentBlockStart" in e:
            use = e["contentBlockStart"]["start"].get("toolUse")
            if use:
                tools[e["contentBlockStart"]["contentBlockIndex"]] = [use["name"], ""]
        elif "contentBlockDelta" in e:
            i, d = e["contentBlockDelta"]["contentBlockIndex"], e["contentBlockDelta"]["delta"]
            if "text" in d:
                text += d["text"]
            elif "toolUse" in d:
                tools[i][1] += d["toolUse"]["input"]
            elif "reasoningContent" in d:
                r = reasoning.setdefault(i, [False, False])
                r[0] |= bool(d["reasoningContent"].get("text"))
                r[1] |= bool(d["reasoningContent"].get("signature"))
        elif "messageStop" in e:
            stop = e["messageStop"]["stopReason"]
        elif "metadata" in e:
            u = e["metadata"]["usage"]
            usage = (u["inputTokens"], u["outputTokens"])
    calls = [[n, json.loads(a or "{}")] for n, a in tools.values()]
    return summary(text, calls, list(reasoning.values()), stop, usage)


def anthropic_events_summary(events: list[dict]) -> dict:
    """Anthropic's stream events (as dicts: InvokeModel's chunks, or the SDK's events dumped)."""
    text, tools, reasoning, stop, usage_in, usage_out = "", {}, {}, None, None, None
    for e in events:
        kind = e["type"]
        if kind == "message_start":
            usage_in = e["message"]["usage"]["input_tokens"]
        elif kind == "content_block_start":
            block = e["content_block"]
            if block["type"] == "tool_use":
                tools[e["index"]] = [block["name"], ""]
            if block["type"] == "thinking":
                reasoning[e["index"]] = [bool(block.get("thinking")), bool(block.get("signature"))]
        elif kind == "content_block_delta":
            d = e["delta"]
            if d["type"] == "text_delta":
                text += d["text"]
            elif d["type"] == "input_json_delta":
                tools[e["index"]][1] += d["partial_json"]
            elif d["type"] == "thinking_delta":
                reasoning.setdefault(e["index"], [False, False])[0] |= bool(d["thinking"])
            elif d["type"] == "signature_delta":
                reasoning.setdefault(e["index"], [False, False])[1] |= bool(d["signature"])
        elif kind == "message_delta":
            stop = e["delta"].get("stop_reason")
            usage_out = e["usage"]["output_tokens"]
            usage_in = e["usage"].get("input_tokens") or usage_in
    calls = [[n, json.loads(a or "{}")] for n, a in tools.values()]
    return summary(text, calls, list(reasoning.values()), stop, (usage_in, usage_out))


def openai_chunks_summary(chunks: list) -> dict:
    """OpenAI chunks; reasoning from `delta.thinking_blocks`, where sluice hands out the
    signed thinking of an Anthropic-shaped answer (LiteLLM's convention,
    https://docs.litellm.ai/docs/reasoning_content)."""
    text, tools, reasoning, stop, usage = "", {}, [], None, None
    for c in chunks:
        if c.usage:
            usage = (c.usage.prompt_tokens, c.usage.completion_tokens)
        for choice in c.choices:
            text += choice.delta.content or ""
            for block in getattr(choice.delta, "thinking_blocks", None) or []:
                if block.get("type") == "thinking":
                    reasoning.append([bool(block.get("thinking")), bool(block.get("signature"))])
            for t in choice.delta.tool_calls or []:
                entry = tools.setdefault(t.index, ["", ""])
                entry[0] += (t.function.name or "") if t.function else ""
                entry[1] += (t.function.arguments or "") if t.function else ""
            stop = choice.finish_reason or stop
    calls = [[n, json.loads(a or "{}")] for n, a in tools.values()]
    return summary(text, calls, reasoning, stop, usage)


def genai_chunks_summary(chunks: list) -> dict:
    text, tools, reasoning, stop, usage = "", [], [], None, None
    for c in chunks:
        for cand in c.candidates or []:
            for part in (cand.content.parts if cand.content else None) or []:
                if part.text and not part.thought:
                    text += part.text
                if part.function_call:
                    tools.append([part.function_call.name, dict(part.function_call.args or {})])
                if part.thought_signature:
                    reasoning.append([bool(part.thought), True])
            stop = cand.finish_reason or stop
        if c.usage_metadata and c.usage_metadata.candidates_token_count is not None:
            # Thinking tokens are billed as output; sluice's other protocols count them so
            # (as Google's OpenAI compatibility layer's completion_tokens do).
            thoughts = c.usage_metadata.thoughts_token_count or 0
            usage = (c.usage_metadata.prompt_token_count, c.usage_metadata.candidates_token_count + thoughts)
    if tools and str(stop) in ("STOP", "FinishReason.STOP"):
        stop = "tool_use"  # Gemini says STOP for a function call; the others say tool use.
    return summary(text, tools, reasoning, stop, usage)


def answer(reply: Any) -> dict:
    """A whole (not streamed) answer as the SDK returned it, for the native surface's
    comparison: its pydantic model or dict, without the transport (`ResponseMetadata`,
    `sdk_http_response`: HTTP headers, request ids)."""
    if hasattr(reply, "model_dump"):
        reply = reply.model_dump(mode="json", exclude_none=True)
    reply = {k: v for k, v in reply.items() if k not in ("ResponseMetadata", "sdk_http_response")}
    return {"events": normalize_events(reply)}


def normalize_events(events: Any) -> Any:
    """A native stream's events with what differs by nature blanked: ids (message, tool
    call, response), timings (`latencyMs`), the model version (Google's clients are told
    the model they named: the sluice profile or the provider's model) and reasoning text
    (the simulator words it after the answer's id); signatures keep their presence."""
    if isinstance(events, dict):
        out = {}
        for k, v in events.items():
            if k in ("latencyMs", "toolUseId", "responseId", "response_id", "create_time", "model_version",
                     "modelVersion", "id", "sdk_http_response", "created", "created_at", "system_fingerprint"):
                out[k] = "<varies>" if v is not None else None
            elif k in ("signature", "thought_signature") and v:
                out[k] = "<signature>"
            elif k == "thinking" and isinstance(v, str):
                out[k] = "<reasoning text>" if v else ""
            elif k in ("reasoningContent", "reasoningText") and isinstance(v, dict) and isinstance(v.get("text"), str):
                out[k] = {**normalize_events(v), "text": "<reasoning text>" if v["text"] else ""}
            elif k == "automatic_function_calling_history":
                continue
            else:
                out[k] = normalize_events(v)
        return out
    if isinstance(events, list):
        return [normalize_events(v) for v in events]
    return events


# ---------------------------------------------------------------------------------------
# Comparison of upstream requests.


def canonical_anthropic(body: dict) -> dict:
    """Anthropic Messages: a string `content` or `system` is the shorthand for one text
    block (https://docs.anthropic.com/en/api/messages, "content": "string or array")."""
    body = copy.deepcopy(body)
    if isinstance(body.get("system"), str):
        body["system"] = [{"type": "text", "text": body["system"]}]
    for m in body.get("messages", []):
        if isinstance(m.get("content"), str):
            m["content"] = [{"type": "text", "text": m["content"]}]
        for block in m["content"]:
            if block.get("type") == "tool_result" and isinstance(block.get("content"), str):
                block["content"] = [{"type": "text", "text": block["content"]}]
    return body


# Fields of Gemini's request whose values are the caller's own JSON: names inside are data.
GEMINI_OPAQUE = {"args", "response", "parameters", "parametersJsonSchema", "responseSchema", "responseJsonSchema", "labels"}


def camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def gemini_json_names(value: Any) -> Any:
    """Gemini's request with every field under its lowerCamelCase JSON name: Google reads
    either name, as proto3 JSON parsers do (https://protobuf.dev/programming-guides/json/,
    "parsers accept both the lowerCamelCase name and the original proto field name"), and
    google-genai sends a few under the original one (`inlineData.mime_type`,
    `parameters_json_schema`). The caller's own JSON (arguments, results, schemas) is left
    as it is."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            k = camel(k)
            out[k] = v if k in GEMINI_OPAQUE else gemini_json_names(v)
        return out
    if isinstance(value, list):
        return [gemini_json_names(v) for v in value]
    return value


def normalize_body(provider: str, path: str, body: Any) -> Any:
    """The named normalizations, each of a difference that means nothing to the provider."""
    if body is None:
        return None
    body = copy.deepcopy(body)
    if provider in ("bedrock-invoke", "vertex-claude"):
        body = canonical_anthropic(body)
    if provider in ("gemini", "vertex-gemini"):
        body = gemini_json_names(body)
        # google-genai gives every Content a role, the system instruction's too; Google
        # ignores it there (a system instruction is "text only", no turn:
        # https://ai.google.dev/api/generate-content#request-body, `systemInstruction`).
        if isinstance(body.get("systemInstruction"), dict):
            body["systemInstruction"].pop("role", None)
    if provider in ("azure-classic", "azure-v1"):
        # `max_tokens` is the deprecated name of `max_completion_tokens` (OpenAI's chat
        # reference, https://platform.openai.com/docs/api-reference/chat/create; Azure the
        # same, https://learn.microsoft.com/en-us/azure/ai-foundry/openai/reference): one
        # limit under either name. sluice names it `max_completion_tokens` when it
        # translates from another protocol, the SDK as the caller wrote it.
        if "max_tokens" in body and "max_completion_tokens" not in body:
            body["max_completion_tokens"] = body.pop("max_tokens")
        # A tool call's `arguments` is JSON text: its spacing is not part of it.
        for m in body.get("messages", []) if isinstance(body.get("messages"), list) else []:
            for call in m.get("tool_calls") or []:
                call["function"]["arguments"] = json.loads(call["function"]["arguments"] or "{}")
    return body


def wire_view(provider: str, r: Recorded) -> dict:
    body: Any
    try:
        body = normalize_body(provider, r.path, r.json())
    except ValueError:
        body = f"<{len(r.body)} bytes, not JSON>"
    return {
        "provider answered": r.status,  # a signature sluice altered would be refused here
        "method": r.method,
        "path": r.path,
        "query": r.query,
        "auth": auth_view(r.headers),
        "headers": header_view(r.headers),
        "body": body,
    }


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where `b` (sluice's) differs from `a` (the SDK's), as `path: sdk != sluice` lines."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            if k not in b:
                out.append(f"{path}.{k}: sluice omits it (SDK: {json.dumps(a[k], default=str)[:200]})")
            elif k not in a:
                out.append(f"{path}.{k}: sluice adds {json.dumps(b[k], default=str)[:200]}")
            else:
                out += differences(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    if a != b:
        return [f"{path}: SDK {json.dumps(a, default=str)[:200]} != sluice {json.dumps(b, default=str)[:200]}"]
    return []


# ---------------------------------------------------------------------------------------
# The catalogue: feature -> (oracle, {protocol: call or "n/a: reason"}) per provider. A call
# takes the Env and returns the client's view (a summary for streams, else None).

Call = Callable[[Env], Any]
NA = str


def bedrock_signed(env: Env, invoke: bool) -> dict:
    """A first turn with thinking and a tool call, from the simulated Bedrock through the
    SDK: its signed reasoning and the call, replayed by the `thinking` feature."""
    client = _sigv4_client(env)
    if invoke:
        answer = client.invoke_model(
            modelId=BEDROCK_MODEL, body=invoke_body("stream-thinking"), contentType="application/json", accept="application/json"
        )
        reply = json.loads(answer["body"].read())
        thought = next(b for b in reply["content"] if b["type"] == "thinking")
        use = next(b for b in reply["content"] if b["type"] == "tool_use")
        signed = {"thinking": thought["thinking"], "signature": thought["signature"], "id": use["id"], "input": use["input"]}
    else:
        reply = client.converse(modelId=BEDROCK_MODEL, **cv_params("stream-thinking"))
        content = reply["output"]["message"]["content"]
        text = next(b["reasoningContent"]["reasoningText"] for b in content if "reasoningContent" in b)
        use = next(b["toolUse"] for b in content if "toolUse" in b)
        signed = {"thinking": text["text"], "signature": text["signature"], "id": use["toolUseId"], "input": use["input"]}
    env.capture.take()
    return signed


def openai_chat(profile: str, feature: str, stream: bool = False, **extra: Any) -> Call:
    def call(env: Env) -> Any:
        client = openai_to_sluice(env)
        params: dict[str, Any] = {"model": profile, "messages": oa_messages(feature), "max_tokens": 20, **extra}
        if feature == "tools":
            params["tools"] = oa_tools()
        if stream:
            chunks = list(client.chat.completions.create(**params, stream=True, stream_options={"include_usage": True}))
            return {"summary": openai_chunks_summary(chunks)}
        client.chat.completions.create(**params)
        return None

    return call


def openai_thinking(profile: str, feature: str, signed_of: Callable[[Env], dict]) -> Call:
    """Thinking as an OpenAI chat client asks for it: `reasoning_effort: "low"` (sluice's
    1,024-token budget, docs/operations.md), and, on the second turn, the assistant message
    sent back with the signed blocks sluice handed out in `thinking_blocks`."""

    def call(env: Env) -> Any:
        params: dict[str, Any] = {"model": profile, "tools": oa_tools(), "max_tokens": 2048, "reasoning_effort": "low"}
        client = openai_to_sluice(env)
        if feature == "stream-thinking":
            chunks = list(client.chat.completions.create(
                messages=[{"role": "user", "content": ASK}], stream=True, stream_options={"include_usage": True}, **params
            ))
            return {"summary": openai_chunks_summary(chunks)}
        signed = signed_of(env)
        tool_call = {"id": signed["id"], "type": "function",
                     "function": {"name": "get_weather", "arguments": json.dumps(signed["input"])}}
        thought = {"type": "thinking", "thinking": signed["thinking"], "signature": signed["signature"]}
        messages = [
            {"role": "user", "content": ASK},
            {"role": "assistant", "content": None, "tool_calls": [tool_call], "thinking_blocks": [thought]},
            {"role": "tool", "tool_call_id": signed["id"], "content": RESULT},
        ]
        client.chat.completions.create(messages=messages, **params)
        return None

    return call


def anthropic_messages(profile: str, feature: str, signed_of: Callable[[Env], dict] | None = None,
                       client_of: Callable[[Env], Any] = anthropic_to_sluice) -> Call:
    def call(env: Env) -> Any:
        client = client_of(env)
        params = an_params(feature, signed_of(env) if signed_of else None)
        if feature == "beta":
            return answer(client.beta.messages.create(model=profile, betas=[BETA], **params))
        if feature.startswith("stream"):
            with client.messages.stream(model=profile, **params) as s:
                raw = [e.model_dump(mode="json") for e in s]
            return {"summary": anthropic_sdk_events_summary(raw)}
        return answer(client.messages.create(model=profile, **params))

    return call


def anthropic_sdk_events_summary(events: list[dict]) -> dict:
    """The anthropic SDK's stream iterates raw events and its own helper events (`text`,
    `thinking`, `signature`, `input_json`, …); the raw ones are Anthropic's wire events."""
    raw = {"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
    return anthropic_events_summary([e for e in events if e["type"] in raw])


def converse(model_of: Callable[[Env], tuple[Any, str]], feature: str, signed_of: Callable[[Env], dict] | None = None) -> Call:
    def call(env: Env) -> Any:
        params = cv_params(feature, signed_of(env) if signed_of else None)
        opener, model = model_of(env)
        with opener as client:
            if feature.startswith("stream"):
                events = list(client.converse_stream(modelId=model, **params)["stream"])
                return {"summary": converse_stream_summary(events), "events": normalize_events(events)}
            return answer(client.converse(modelId=model, **params))

    return call


def invoke(model_of: Callable[[Env], tuple[Any, str]], feature: str, signed_of: Callable[[Env], dict] | None = None) -> Call:
    def call(env: Env) -> Any:
        body = invoke_body(feature, signed_of(env) if signed_of else None)
        opener, model = model_of(env)
        with opener as client:
            if feature.startswith("stream"):
                # contentType and accept as AWS's InvokeModel reference asks for a JSON body
                # (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModel.html).
                reply = client.invoke_model_with_response_stream(
                    modelId=model, body=body, contentType="application/json", accept="application/json"
                )
                events = [json.loads(e["chunk"]["bytes"]) for e in reply["body"]]
                return {"summary": anthropic_events_summary(events), "events": normalize_events(events)}
            reply = client.invoke_model(modelId=model, body=body, contentType="application/json", accept="application/json")
            return answer(json.loads(reply["body"].read()))

    return call


def openai_responses(profile: str) -> Call:
    """The `text` request as an OpenAI Responses client writes it."""

    def call(env: Env) -> Any:
        openai_to_sluice(env).responses.create(model=profile, instructions=SYSTEM, input=HELLO, max_output_tokens=20)

    return call


def responses_case(oracle: Call, profile: str) -> tuple[Call, dict[str, Call | NA]]:
    """Responses from an OpenAI client to a provider without a Responses API: its oracle is
    the provider's SDK sending the `text` request (instructions as the system prompt)."""
    return oracle, {
        "openai": openai_responses(profile),
        "anthropic": "n/a: the Anthropic API has no Responses endpoint",
        "native": "n/a: the provider has no Responses API",
    }


# What an Anthropic-shaped provider (Bedrock's Claude, Claude on Vertex) is asked.
ANTHROPIC_FEATURES = ("text", "image", "tools", "thinking", "cache", "beta", "stream", "stream-thinking")


def openai_to_anthropic_shape(profile: str, feature: str, signed_of: Callable[[Env], dict]) -> Call | NA:
    """The OpenAI chat client's side of a feature of an Anthropic-shaped provider."""
    if feature in ("thinking", "stream-thinking"):
        return openai_thinking(profile, feature, signed_of)
    if feature == "cache":
        return "n/a: OpenAI chat has no cache breakpoint (OpenAI and Azure cache prompts without one)"
    if feature == "beta":
        return "n/a: OpenAI chat has no beta flags"
    return openai_chat(profile, feature, stream=feature == "stream")


def bedrock_catalogue(invoke_api: bool) -> dict[str, tuple[Call, dict[str, Call | NA]]]:
    profile = "br-invoke" if invoke_api else "br-converse"
    native = invoke if invoke_api else converse
    oracle_of = lambda env: (bedrock_oracle(env), BEDROCK_MODEL)  # noqa: E731
    sluice_of = lambda env: (bedrock_to_sluice(env), profile)  # noqa: E731
    memo: dict[str, dict] = {}

    def signed(env: Env) -> dict:
        if "s" not in memo:
            memo["s"] = bedrock_signed(env, invoke_api)
        return memo["s"]

    cat: dict[str, tuple[Call, dict[str, Call | NA]]] = {}
    for feature in ANTHROPIC_FEATURES:
        s = signed if feature == "thinking" else None
        cat[feature] = (
            native(oracle_of, feature, s),
            {"openai": openai_to_anthropic_shape(profile, feature, signed), "anthropic": anthropic_messages(profile, feature, s), "native": native(sluice_of, feature, s)},
        )
    cat["responses"] = responses_case(native(oracle_of, "text"), profile)
    return cat


def gemini_signed(env: Env, vertex: bool) -> dict:
    """A first turn of a Gemini 3 model calling a tool, through the SDK: the call and its
    thought signature, replayed by the `thinking` feature."""
    client = gemini_oracle(env, vertex)
    from google.genai import types

    question = types.Content(role="user", parts=[types.Part.from_text(text=ASK)])
    reply = client.models.generate_content(model=GEMINI3, contents=[question], config=gm_config("tools"))
    part = reply.candidates[0].content.parts[0]
    env.capture.take()
    return {"input": dict(part.function_call.args), "signature": part.thought_signature}


def gemini_oracle(env: Env, vertex: bool):
    if vertex:
        return genai(env.capture.url, vertex=True, credentials=service_account(env))
    return genai(env.capture.url, key=GEMINI_KEY)


def gemini_to_sluice(env: Env, vertex: bool):
    if vertex:
        return genai(env.gateway, vertex=True, credentials=sluice_vertex_credentials())
    return genai(env.gateway, key=KEY)


def generate(client_of: Callable[[Env], Any], model: str, feature: str, signed_of: Callable[[Env], dict] | None = None) -> Call:
    def call(env: Env) -> Any:
        client = client_of(env)
        contents = gm_contents(feature, signed_of(env) if signed_of else None)
        config = gm_config(feature)
        if feature == "stream":
            chunks = list(client.models.generate_content_stream(model=model, contents=contents, config=config))
            events = [c.model_dump(mode="json", exclude_none=True) for c in chunks]
            return {"summary": genai_chunks_summary(chunks), "events": normalize_events(events)}
        return answer(client.models.generate_content(model=model, contents=contents, config=config))

    return call


def openai_gemini_thinking(profile: str, signed_of: Callable[[Env], dict]) -> Call:
    """The second turn from an OpenAI chat client: the assistant's tool call carries the
    signature where sluice hands it out (`extra_content.google.thought_signature`)."""

    def call(env: Env) -> Any:
        signed = signed_of(env)
        signature = base64.b64encode(signed["signature"]).decode()
        tool_call = {
            "id": CALL_ID, "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps(signed["input"])},
            "extra_content": {"google": {"thought_signature": signature}},
        }
        messages = [
            {"role": "user", "content": ASK},
            {"role": "assistant", "content": None, "tool_calls": [tool_call]},
            {"role": "tool", "tool_call_id": CALL_ID, "content": RESULT},
        ]
        openai_to_sluice(env).chat.completions.create(model=profile, messages=messages, tools=oa_tools(), max_tokens=20)

    return call


def anthropic_gemini_thinking(profile: str, signed_of: Callable[[Env], dict]) -> Call:
    """The second turn from an Anthropic client: the call's thought signature in the
    `thinking` block sluice hands out just before the call (`gemini:` and the signature)."""

    def call(env: Env) -> Any:
        signed = signed_of(env)
        signature = "gemini:" + base64.b64encode(signed["signature"]).decode()
        params = an_params("tools")
        params["messages"] = [
            {"role": "user", "content": ASK},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "", "signature": signature},
                {"type": "tool_use", "id": CALL_ID, "name": "get_weather", "input": signed["input"]},
            ]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": CALL_ID, "content": RESULT}]},
        ]
        anthropic_to_sluice(env).messages.create(model=profile, **params)

    return call


def google_catalogue(vertex: bool) -> dict[str, tuple[Call, dict[str, Call | NA]]]:
    profile, profile3 = ("vx-gemini", "vx-gemini3") if vertex else ("gemini", "gemini3")
    oracle_of = lambda env: gemini_oracle(env, vertex)  # noqa: E731
    sluice_of = lambda env: gemini_to_sluice(env, vertex)  # noqa: E731
    memo: dict[str, dict] = {}

    def signed(env: Env) -> dict:
        if "s" not in memo:
            memo["s"] = gemini_signed(env, vertex)
        return memo["s"]

    cat: dict[str, tuple[Call, dict[str, Call | NA]]] = {}
    for feature in ("text", "image", "tools", "stream"):
        cat[feature] = (
            generate(oracle_of, GEMINI, feature),
            {
                "openai": openai_chat(profile, feature, stream=feature == "stream"),
                "anthropic": anthropic_messages(profile, feature),
                "native": generate(sluice_of, profile, feature),
            },
        )
    cat["thinking"] = (
        generate(oracle_of, GEMINI3, "thinking", signed),
        {
            "openai": openai_gemini_thinking(profile3, signed),
            "anthropic": anthropic_gemini_thinking(profile3, signed),
            "native": generate(sluice_of, profile3, "thinking", signed),
        },
    )
    cat["effort"] = (
        generate(oracle_of, GEMINI, "effort"),
        {
            "openai": openai_effort(profile),
            "anthropic": anthropic_thinking_budget(profile),
            "native": generate(sluice_of, profile, "effort"),
        },
    )
    cat["responses"] = responses_case(generate(oracle_of, GEMINI, "text"), profile)
    return cat


def openai_effort(profile: str) -> Call:
    """A thinking budget as an OpenAI chat client asks for one: `reasoning_effort`."""

    def call(env: Env) -> Any:
        openai_to_sluice(env).chat.completions.create(
            model=profile, messages=[{"role": "user", "content": HELLO}], max_tokens=20, reasoning_effort="low"
        )

    return call


def anthropic_thinking_budget(profile: str) -> Call:
    """A thinking budget as an Anthropic client asks for one."""

    def call(env: Env) -> Any:
        # Gemini counts thinking within the output limit and checks it itself: sluice does
        # not hold a Gemini deployment to Anthropic's `max_tokens` above the budget.
        anthropic_to_sluice(env).messages.create(
            model=profile, max_tokens=20, thinking=THINKING, messages=[{"role": "user", "content": HELLO}]
        )

    return call


def vertex_claude_oracle(env: Env) -> anthropic.AnthropicVertex:
    return anthropic.AnthropicVertex(
        region="us-east5", project_id="acme-ai", credentials=service_account(env),
        base_url=f"{env.capture.url}/v1", max_retries=0,
    )


def vertex_claude_to_sluice(env: Env) -> anthropic.AnthropicVertex:
    return anthropic.AnthropicVertex(
        region="us-east5", project_id="acme-ai", access_token=KEY, base_url=f"{env.gateway}/v1", max_retries=0
    )


def vertex_claude_catalogue() -> dict[str, tuple[Call, dict[str, Call | NA]]]:
    profile = "vx-claude"
    memo: dict[str, dict] = {}

    def signed(env: Env) -> dict:
        if "s" not in memo:
            reply = vertex_claude_oracle(env).messages.create(model=CLAUDE_VERTEX, **an_params("stream-thinking"))
            thought = next(b for b in reply.content if b.type == "thinking")
            use = next(b for b in reply.content if b.type == "tool_use")
            memo["s"] = {"thinking": thought.thinking, "signature": thought.signature, "id": use.id, "input": use.input}
            env.capture.take()
        return memo["s"]

    cat: dict[str, tuple[Call, dict[str, Call | NA]]] = {}
    for feature in ANTHROPIC_FEATURES:
        s = signed if feature == "thinking" else None
        cat[feature] = (
            anthropic_messages(CLAUDE_VERTEX, feature, s, client_of=vertex_claude_oracle),
            {
                "openai": openai_to_anthropic_shape(profile, feature, signed),
                "anthropic": anthropic_messages(profile, feature, s),
                "native": anthropic_messages(profile, feature, s, client_of=vertex_claude_to_sluice),
            },
        )
    cat["responses"] = responses_case(anthropic_messages(CLAUDE_VERTEX, "text", client_of=vertex_claude_oracle), profile)
    return cat


def azure_call(client_of: Callable[[Env], Any], model: str, feature: str) -> Call:
    def call(env: Env) -> Any:
        client = client_of(env)
        if feature == "embeddings":
            return answer(client.embeddings.create(model=model, input=["one", "two"]))
        if feature == "responses":
            return answer(client.responses.create(model=model, instructions=SYSTEM, input=HELLO, max_output_tokens=20))
        params: dict[str, Any] = {"model": model, "messages": oa_messages(feature), "max_tokens": 20}
        if feature == "tools":
            params["tools"] = oa_tools()
        if feature == "stream":
            chunks = list(client.chat.completions.create(**params, stream=True, stream_options={"include_usage": True}))
            events = [c.model_dump(mode="json", exclude_none=True) for c in chunks]
            return {"summary": openai_chunks_summary(chunks), "events": normalize_events(events)}
        return answer(client.chat.completions.create(**params))

    return call


def azure_catalogue(surface: str) -> dict[str, tuple[Call, dict[str, Call | NA]]]:
    chat, embed = ("az-chat", "az-embed") if surface == "azure-classic" else ("v1-chat", "v1-embed")
    oracle_of = lambda env: azure_oracle(env, surface)  # noqa: E731
    sluice_of = lambda env: azure_to_sluice(env, surface)  # noqa: E731
    cat: dict[str, tuple[Call, dict[str, Call | NA]]] = {}
    for feature in ("text", "image", "tools", "stream", "embeddings", "responses"):
        model = AZURE_EMBED if feature == "embeddings" else AZURE_DEPLOYMENT
        profile = embed if feature == "embeddings" else chat
        an: Call | NA = (
            anthropic_messages(profile, feature) if feature in ("text", "image", "tools", "stream")
            else f"n/a: the Anthropic API has no {feature.capitalize()} endpoint"
        )
        cat[feature] = (
            azure_call(oracle_of, model, feature),
            {"openai": azure_call(openai_to_sluice, profile, feature), "anthropic": an, "native": azure_call(sluice_of, profile, feature)},
        )
    return cat


CATALOGUES: dict[str, Callable[[], dict[str, tuple[Call, dict[str, Call | NA]]]]] = {
    "azure-classic": lambda: azure_catalogue("azure-classic"),
    "azure-v1": lambda: azure_catalogue("azure-v1"),
    "bedrock-converse": lambda: bedrock_catalogue(False),
    "bedrock-invoke": lambda: bedrock_catalogue(True),
    "gemini": lambda: google_catalogue(False),
    "vertex-gemini": lambda: google_catalogue(True),
    "vertex-claude": vertex_claude_catalogue,
}

# Features a provider kind has no counterpart for: not requested, the reason in the table.
NOT_OFFERED: dict[tuple[str, str], str] = {
    **{(p, f): r for p in ("azure-classic", "azure-v1") for f, r in (
        ("thinking", "Azure's chat completions return no signed reasoning to replay"),
        ("cache", "Azure caches prompts without breakpoints"),
        ("beta", "Azure has no beta flags"),
    )},
    **{(p, f): r for p in ("gemini", "vertex-gemini") for f, r in (
        ("cache", "Gemini caches through cachedContents resources, not breakpoints in a request"),
        ("beta", "Gemini has no beta flags"),
        ("embeddings", "Gemini's embeddings are a separate API (`embedContent`), not compared here"),
    )},
    **{(p, "embeddings"): "Anthropic models have no embeddings" for p in ("bedrock-converse", "bedrock-invoke", "vertex-claude")},
}

FEATURES = {
    "text": "text with a system prompt",
    "image": "an image (base64)",
    "tools": "tools, a tool call and its result",
    "thinking": "thinking + tool call replayed with its signature (2nd turn)",
    "effort": "a thinking budget (`reasoning_effort`, `thinkingConfig`)",
    "cache": "a cache breakpoint",
    "beta": "a beta flag (`anthropic-beta`)",
    "stream": "a streamed answer",
    "stream-thinking": "a streamed thinking + tool-call answer",
    "embeddings": "embeddings",
    "responses": "the Responses API",
}

# ---------------------------------------------------------------------------------------
# The tests.

_oracles: dict[tuple[str, str], tuple[list[Recorded], Any]] = {}
_rows: list[dict] = []


@pytest.fixture(scope="module", autouse=True)
def fidelity_file() -> Iterator[None]:
    yield
    OUT.parent.mkdir(parents=True, exist_ok=True)
    rows = _rows + [
        {"provider": p, "feature": f, "protocol": proto, "outcome": "n/a", "note": reason}
        for (p, f), reason in NOT_OFFERED.items() for proto in PROTOCOLS
    ]
    OUT.write_text(json.dumps({"providers": PROVIDERS, "features": FEATURES, "protocols": list(PROTOCOLS),
                               "rows": sorted(rows, key=lambda r: (r["provider"], r["feature"], r["protocol"]))}, indent=1))


_catalogues: dict[str, dict] = {}


def catalogue(provider: str) -> dict[str, tuple[Call, dict[str, Call | NA]]]:
    if provider not in _catalogues:
        _catalogues[provider] = CATALOGUES[provider]()
    return _catalogues[provider]


def cases() -> list[tuple[str, str, str]]:
    return [(p, f, proto) for p, build in CATALOGUES.items() for f, (_, via) in build().items() for proto in PROTOCOLS]


def run(env: Env, call: Call) -> tuple[list[Recorded], Any, Exception | None]:
    env.capture.take()
    try:
        seen = call(env)
        error = None
    except (openai.APIStatusError, anthropic.APIStatusError, Exception) as e:  # noqa: BLE001 — classified below
        seen, error = None, e
    return env.capture.take(), seen, error


def status_of(error: Exception) -> int | None:
    for attr in ("status_code", "code"):
        value = getattr(error, attr, None)
        if isinstance(value, int):
            return value
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        return response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return None


@pytest.mark.parametrize("provider,feature,protocol", cases())
def test_sluice_sends_what_the_sdk_sends(env: Env, provider: str, feature: str, protocol: str) -> None:
    oracle, via = catalogue(provider)[feature]
    if (provider, feature) not in _oracles:
        sent, seen, error = run(env, oracle)
        assert error is None, f"the SDK itself failed against the simulated provider: {error!r}"
        assert len(sent) == 1, [r.path for r in sent]
        _oracles[(provider, feature)] = (sent, seen)
    (expected,), expected_seen = _oracles[(provider, feature)]
    call = via[protocol]
    row = {"provider": provider, "feature": feature, "protocol": protocol}
    key = (provider, feature, protocol)
    if isinstance(call, str):
        _rows.append({**row, "outcome": "n/a", "note": call.removeprefix("n/a: ")})
        return
    sent, seen, error = run(env, call)
    if error is not None and not sent and (status_of(error) or 0) // 100 == 4:
        assert key in REFUSED, f"sluice refused it ({error!r}); not in REFUSED"
        _rows.append({**row, "outcome": "refused", "note": REFUSED[key]})
        return
    assert key not in REFUSED, f"REFUSED lists {key}, but sluice did not refuse it (error: {error!r})"
    diffs: list[str] = []
    if error is not None:
        diffs.append(f"the client got {error!r}")
    if len(sent) != 1:
        diffs.append(f"sluice sent {len(sent)} upstream requests: {[r.path for r in sent]}")
    else:
        diffs += differences(wire_view(provider, expected), wire_view(provider, sent[0]))
    if expected_seen is not None and error is None:
        if "summary" in expected_seen:
            diffs += [f"client view{d}" for d in differences(expected_seen["summary"], seen["summary"])]
        if protocol == "native" and "events" in expected_seen:
            diffs += [f"native answer{d}" for d in differences(expected_seen["events"], seen["events"])]
    if diffs:
        reasons, unexplained = [], []
        for line in diffs:
            entry = allowed_entry(provider, protocol, line)
            if entry is None:
                unexplained.append(line)
            elif ALLOWED[entry][3] not in reasons:
                _allowed_used.add(entry)
                reasons.append(ALLOWED[entry][3])
        note = " ".join(reasons) if not unexplained else "; ".join(unexplained)
        _rows.append({**row, "outcome": "differs", "note": note})
        assert not unexplained, f"{provider} {feature} via {protocol}:\n  " + "\n  ".join(unexplained)
        return
    _rows.append({**row, "outcome": "same" if protocol == "native" else "translated", "note": ""})


def allowed_entry(provider: str, protocol: str, line: str) -> int | None:
    for i, (providers, protocols, pattern, _) in enumerate(ALLOWED):
        if re.fullmatch(providers, provider) and re.fullmatch(protocols, protocol) and re.search(pattern, line):
            _allowed_used.add(i)
            return i
    return None


def test_every_allowed_difference_still_happens() -> None:
    """Runs after the cases (pytest keeps the file's order): an ALLOWED entry that no case
    needed is stale. Only meaningful when every case ran (not under `-k`)."""
    ran = {(r["provider"], r["feature"], r["protocol"]) for r in _rows}
    if len(ran) < len(cases()):
        pytest.skip("not every case ran (a -k selection)")
    stale = [ALLOWED[i][:3] for i in range(len(ALLOWED)) if i not in _allowed_used]
    assert not stale, f"ALLOWED entries no case needs any more: {stale}"
