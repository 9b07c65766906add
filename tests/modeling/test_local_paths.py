"""A saved student does not record the folder its backbone was loaded from (it would reach the Hub)."""

from __future__ import annotations

import json

from transformers import BertModel

from ..conftest import make_bert_config


def test_saved_student_has_no_local_backbone_path(tiny_tokenizer, tmp_path):
    from hf_distill import CrossEncoderModel, SiameseModel

    backbone = tmp_path / "backbone"
    BertModel(make_bert_config(1)).save_pretrained(backbone)
    tiny_tokenizer.save_pretrained(backbone)
    for cls in (CrossEncoderModel, SiameseModel):
        student = cls.from_backbone(str(backbone.resolve()))
        student.save_pretrained(tmp_path / cls.__name__)
        reloaded = cls.from_pretrained(str((tmp_path / cls.__name__).resolve()))
        reloaded.save_pretrained(tmp_path / f"{cls.__name__}_again")  # loaded from a local folder, saved again
        for folder in (cls.__name__, f"{cls.__name__}_again"):
            text = (tmp_path / folder / "config.json").read_text()
            assert str(tmp_path) not in text, folder
            assert json.loads(text)["encoder"].get("_name_or_path", "") == ""
