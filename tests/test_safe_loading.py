"""Safe loading: no pickle, safe YAML, no remote code unless asked, no network with HF_HUB_OFFLINE=1.

The package source is scanned as syntax trees (comments and docstrings do not count), and a tiny
build / save / load / train / resume cycle runs with every socket connection refused.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import socket
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import hf_distill

PACKAGE = Path(hf_distill.__file__).parent
SOURCES = sorted(PACKAGE.rglob("*.py"))
PICKLE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "marshal", "shelve", "joblib"}
SAFE_YAML = {"safe_load", "safe_load_all", "safe_dump", "safe_dump_all", "dump", "YAMLError"}
# The only torch.save: `training_args.bin`, the Trainer's own file next to a merged student (as
# `Trainer.save_model` writes it); hf_distill never reads it back.
TORCH_SAVE_ALLOWED = ("training_args.bin",)


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _constants(node: ast.AST) -> list:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant)]


def _is_true(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _guarded_by_user_flag(node: ast.AST, parents: dict) -> bool:
    """Inside an `if <...>.trust_remote_code:` (the user's own switch)."""
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "trust_remote_code" in ast.unparse(node.test):
            return True
    return False


def scan(source: str, filename: str = "<source>") -> list[str]:
    """Every unsafe construct in `source`, as 'file:line: what'."""
    tree = ast.parse(source, filename)
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    problems = []

    def report(node, what):
        problems.append(f"{filename}:{node.lineno}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in PICKLE_MODULES:
                    report(node, f"import {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            if (node.module or "").split(".")[0] in PICKLE_MODULES:
                report(node, f"from {node.module} import ...")
            if node.module == "yaml" and any(a.name not in SAFE_YAML for a in node.names):
                report(node, "from yaml import an unsafe loader")
            if node.module == "torch" and any(a.name in ("load", "save") for a in node.names):
                report(node, "from torch import load/save (call torch.load / torch.save so they are checked)")
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            keywords = {k.arg: k.value for k in node.keywords if k.arg}
            if name == "torch.load":
                if not _is_true(keywords.get("weights_only")):
                    report(node, "torch.load without weights_only=True")
            if name == "torch.save" and not any(
                isinstance(c, str) and c.endswith(TORCH_SAVE_ALLOWED) for c in _constants(node)
            ):
                report(node, "torch.save (weights and state go to safetensors / JSON)")
            if name.startswith("yaml.") and name.split(".", 1)[1] not in SAFE_YAML:
                report(node, f"{name} (use yaml.safe_load)")
            if name.endswith(("read_pickle", "to_pickle")) or (name.endswith("load") and _is_true(keywords.get("allow_pickle"))):
                report(node, f"{name} reads or writes pickle")
            if _is_true(keywords.get("trust_remote_code")):
                report(node, "trust_remote_code=True")
            if isinstance(keywords.get("use_safetensors"), ast.Constant) and keywords["use_safetensors"].value is False:
                report(node, "use_safetensors=False")
            if isinstance(keywords.get("safe_serialization"), ast.Constant) and keywords["safe_serialization"].value is False:
                report(node, "safe_serialization=False")
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == "trust_remote_code" and _is_true(value):
                    report(node, "{'trust_remote_code': True}")
        elif isinstance(node, ast.Assign) and _is_true(node.value):
            for target in node.targets:
                subscript = isinstance(target, ast.Subscript) and "trust_remote_code" in _constants(target.slice)
                attribute = isinstance(target, (ast.Attribute, ast.Name)) and _dotted(target).endswith("trust_remote_code")
                if (subscript or attribute) and not _guarded_by_user_flag(node, parents):
                    report(node, "trust_remote_code set to True without the user asking")
        elif isinstance(node, ast.AnnAssign) and _dotted(node.target) == "trust_remote_code" and node.value is not None:
            value = node.value
            if isinstance(value, ast.Call) and _dotted(value.func).endswith("field"):
                value = {k.arg: k.value for k in value.keywords}.get("default")
            if not (isinstance(value, ast.Constant) and value.value in (False, None)):
                report(node, "trust_remote_code field does not default to False")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args
            positional = arguments.posonlyargs + arguments.args
            defaults = dict(zip([a.arg for a in positional][len(positional) - len(arguments.defaults):], arguments.defaults))
            defaults.update({a.arg: d for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d is not None})
            if _is_true(defaults.get("trust_remote_code")):
                report(node, f"{node.name}(trust_remote_code=True) by default")
    return problems


def test_the_scanner_catches_what_it_should_and_ignores_comments():
    bad = '''
import pickle
from yaml import load
import yaml, torch
# torch.load(path)   a comment does not count
"""yaml.load(text) in a docstring does not count"""
state = torch.load(path)
state = torch.load(path, weights_only=False)
config = yaml.load(text, Loader=yaml.Loader)
torch.save(model.state_dict(), "weights.bin")
AutoModel.from_pretrained(name, trust_remote_code=True)
kwargs["trust_remote_code"] = True
def load_model(name, trust_remote_code=True): ...
@dataclass
class Arguments:
    trust_remote_code: bool = field(default=True)
'''
    found = "\n".join(scan(bad))
    for what in (
        "import pickle", "from yaml import", "torch.load without weights_only=True", "yaml.load", "torch.save",
        ":11: trust_remote_code=True", ":12: trust_remote_code set to True", "load_model(trust_remote_code=True)",
        "does not default to False",
    ):
        assert what in found, what
    assert ":5:" not in found and ":6:" not in found and found.count("torch.load without") == 2
    good = '''
if model_args.trust_remote_code:
    kwargs["trust_remote_code"] = True
state = torch.load(path, weights_only=True)
settings = yaml.safe_load(handle)
torch.save(self.args, os.path.join(output_dir, "training_args.bin"))
AutoConfig.from_pretrained(name, trust_remote_code=kwargs.get("trust_remote_code"))
'''
    assert scan(good) == []


def test_package_source_loads_safely():
    assert len(SOURCES) > 10
    problems = [p for path in SOURCES for p in scan(path.read_text(encoding="utf-8"), str(path.relative_to(PACKAGE)))]
    assert problems == []


def test_trust_remote_code_defaults_to_false():
    from hf_distill.cli import ModelArguments

    default = {f.name: f.default for f in dataclasses.fields(ModelArguments)}["trust_remote_code"]
    assert default is False


# ------------------------------------------------------------------------------ no network, safetensors only
@pytest.fixture
def no_network(monkeypatch):
    """Every connection attempt (and name lookup) fails the test."""
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args[1:] if args else kwargs)
        raise AssertionError(f"network call with HF_HUB_OFFLINE=1: {args[1:] if args else kwargs}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: refuse(None, *a))
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: refuse(None, *a))
    yield attempts
    assert attempts == []


def test_the_network_guard_refuses_connections(no_network):
    with pytest.raises(AssertionError, match="network call"):
        socket.create_connection(("huggingface.co", 443), timeout=1)
    with pytest.raises(AssertionError, match="network call"):
        with socket.socket() as sock:
            sock.connect(("127.0.0.1", 9))
    assert len(no_network) == 2
    no_network.clear()


def test_offline_build_save_load_train_resume_makes_no_network_call(tmp_path, tiny_tokenizer, no_network, monkeypatch):
    from transformers import AutoModel, AutoTokenizer, BertModel

    from hf_distill import CrossEncoderModel, SiameseModel
    from hf_distill.trainer import DISTILLATION_STATE_NAME, DistillationTrainer
    from tests.conftest import make_bert_config, make_cross_encoder, make_siamese
    from tests.test_trainer import make_args, pair_dataset

    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    # build and save a teacher, a Siamese model and a plain backbone; load them back by path
    teacher_dir, siamese_dir, backbone_dir = tmp_path / "teacher", tmp_path / "siamese", tmp_path / "backbone"
    make_cross_encoder(tiny_tokenizer, num_layers=2, seed=1).save_pretrained(teacher_dir)
    make_siamese(tiny_tokenizer).save_pretrained(siamese_dir)
    BertModel(make_bert_config(2)).save_pretrained(backbone_dir)
    tiny_tokenizer.save_pretrained(backbone_dir)
    for folder in (teacher_dir, siamese_dir, backbone_dir):
        files = {p.name for p in folder.iterdir()}
        assert "model.safetensors" in files and not any(f.endswith((".bin", ".pt", ".pth", ".pkl")) for f in files), files
    assert isinstance(AutoModel.from_pretrained(teacher_dir), CrossEncoderModel)
    assert isinstance(SiameseModel.from_pretrained(siamese_dir).tokenizer, type(AutoTokenizer.from_pretrained(backbone_dir)))
    assert SiameseModel.from_backbone(str(backbone_dir), num_labels=2).tokenizer is not None

    # a tiny distillation run with the teacher given by path, checkpoints, and a resume
    student = CrossEncoderModel.from_backbone(str(backbone_dir), num_labels=2, attn_implementation="eager")
    args = make_args(tmp_path, max_steps=4, save_strategy="steps", save_steps=2, hidden_weight=1.0, per_device_train_batch_size=4)
    trainer = DistillationTrainer(model=student, args=args, teachers=str(teacher_dir), train_dataset=pair_dataset(16))
    trainer.train()
    checkpoint = Path(args.output_dir) / "checkpoint-2"
    assert load_file(str(checkpoint / DISTILLATION_STATE_NAME))  # the extra state: safetensors
    trainer.save_model(str(tmp_path / "final"))
    assert "model.safetensors" in {p.name for p in (tmp_path / "final").iterdir()}

    # resuming reads the Trainer's .pt / .pth files with weights_only=True only (no unpickling of objects)
    original = torch.load
    calls = []

    def checked_load(*a, **k):
        calls.append(k.get("weights_only"))
        assert k.get("weights_only") is True, f"torch.load without weights_only=True: {a}"
        return original(*a, **k)

    monkeypatch.setattr(torch, "load", checked_load)
    student = CrossEncoderModel.from_backbone(str(backbone_dir), num_labels=2, attn_implementation="eager")
    resumed = DistillationTrainer(model=student, args=args, teachers=str(teacher_dir), train_dataset=pair_dataset(16))
    resumed.train(resume_from_checkpoint=str(checkpoint))
    assert calls and resumed.state.global_step == 4
