"""One table of the papers the package implements: BibTeX, a short reference, and the methods built on them.

The model card (tags, citations), the presets (`DistillationMethod.citation`) and the loss
components (`LossComponent.method`) read this table; nothing else spells a citation.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CITATIONS", "METHODS", "Method", "reference"]

CITATIONS: dict[str, dict[str, str]] = {
    "hinton2015": {
        "title": "Distilling the Knowledge in a Neural Network (Hinton et al., 2015)",
        "bibtex": """@misc{hinton2015distilling,
  title         = {Distilling the Knowledge in a Neural Network},
  author        = {Hinton, Geoffrey and Vinyals, Oriol and Dean, Jeff},
  year          = {2015},
  eprint        = {1503.02531},
  archivePrefix = {arXiv},
  primaryClass  = {stat.ML}
}""",
    },
    "dvbert": {
        "title": "DvBERT: Dual-View Distilled BERT for Sentence Embedding (Cheng, SIGIR 2021)",
        "bibtex": """@inproceedings{cheng2021dvbert,
  title         = {Dual-View Distilled {BERT} for Sentence Embedding},
  author        = {Cheng, Xingyi},
  booktitle     = {Proceedings of the 44th International ACM SIGIR Conference on Research and Development in Information Retrieval},
  year          = {2021},
  eprint        = {2104.08675},
  archivePrefix = {arXiv}
}""",
    },
    "tinybert": {
        "title": "TinyBERT: Distilling BERT for Natural Language Understanding (Jiao et al., Findings of EMNLP 2020)",
        "bibtex": """@inproceedings{jiao2020tinybert,
  title         = {{TinyBERT}: Distilling {BERT} for Natural Language Understanding},
  author        = {Jiao, Xiaoqi and Yin, Yichun and Shang, Lifeng and Jiang, Xin and Chen, Xiao and Li, Linlin and Wang, Fang and Liu, Qun},
  booktitle     = {Findings of the Association for Computational Linguistics: EMNLP 2020},
  year          = {2020},
  eprint        = {1909.10351},
  archivePrefix = {arXiv}
}""",
    },
    "simplified_tinybert": {
        "title": "Simplified TinyBERT: Knowledge Distillation for Document Retrieval (Chen et al., 2020)",
        "bibtex": """@misc{chen2020simplified,
  title         = {Simplified {TinyBERT}: Knowledge Distillation for Document Retrieval},
  author        = {Chen, Xuanang and He, Ben and Hui, Kai and Sun, Le and Sun, Yingfei},
  year          = {2020},
  eprint        = {2009.07531},
  archivePrefix = {arXiv}
}""",
    },
    "bert_emd": {
        "title": "BERT-EMD: Many-to-Many Layer Mapping for BERT Compression with Earth Mover's Distance (Li et al., EMNLP 2020)",
        "bibtex": """@inproceedings{li2020bertemd,
  title         = {{BERT-EMD}: Many-to-Many Layer Mapping for {BERT} Compression with Earth Mover's Distance},
  author        = {Li, Jianquan and Liu, Xiaokang and Zhao, Honghong and Xu, Ruifeng and Yang, Min and Jin, Yaohong},
  booktitle     = {Proceedings of the 2020 Conference on Empirical Methods in Natural Language Processing (EMNLP)},
  year          = {2020},
  eprint        = {2010.06133},
  archivePrefix = {arXiv}
}""",
    },
    "virt": {
        "title": "VIRT: Improving Representation-based Text Matching via Virtual Interaction (Li et al., EMNLP 2022)",
        "bibtex": """@inproceedings{li2022virt,
  title         = {{VIRT}: Improving Representation-based Text Matching via Virtual Interaction},
  author        = {Li, Dan and Yang, Yang and Tang, Hongyin and Wang, Jingang and Xu, Tong and Wu, Wei and Chen, Enhong},
  booktitle     = {Proceedings of the 2022 Conference on Empirical Methods in Natural Language Processing (EMNLP)},
  year          = {2022},
  eprint        = {2112.04195},
  archivePrefix = {arXiv}
}""",
    },
    "hofstatter2020": {
        "title": "Improving Efficient Neural Ranking Models with Cross-Architecture Knowledge Distillation "
        "(Hofstätter et al., 2020)",
        "bibtex": """@misc{hofstatter2020margin,
  title         = {Improving Efficient Neural Ranking Models with Cross-Architecture Knowledge Distillation},
  author        = {Hofst{\\"a}tter, Sebastian and Althammer, Sophia and Schr{\\"o}der, Michael and Sertkan, Mete and Hanbury, Allan},
  year          = {2020},
  eprint        = {2010.02666},
  archivePrefix = {arXiv},
  primaryClass  = {cs.IR}
}""",
    },
    "rocketqav2": {
        "title": "RocketQAv2: A Joint Training Method for Dense Passage Retrieval and Passage Re-ranking (Ren et al., EMNLP 2021)",
        "bibtex": """@inproceedings{ren2021rocketqav2,
  title         = {{RocketQAv2}: A Joint Training Method for Dense Passage Retrieval and Passage Re-ranking},
  author        = {Ren, Ruiyang and Qu, Yingqi and Liu, Jing and Zhao, Wayne Xin and She, Qiaoqiao and Wu, Hua and Wang, Haifeng and Wen, Ji-Rong},
  booktitle     = {Proceedings of the 2021 Conference on Empirical Methods in Natural Language Processing (EMNLP)},
  year          = {2021},
  eprint        = {2110.07367},
  archivePrefix = {arXiv}
}""",
    },
    "reimers2020": {
        "title": "Making Monolingual Sentence Embeddings Multilingual using Knowledge Distillation (Reimers & Gurevych, EMNLP 2020)",
        "bibtex": """@inproceedings{reimers2020multilingual,
  title         = {Making Monolingual Sentence Embeddings Multilingual using Knowledge Distillation},
  author        = {Reimers, Nils and Gurevych, Iryna},
  booktitle     = {Proceedings of the 2020 Conference on Empirical Methods in Natural Language Processing (EMNLP)},
  year          = {2020},
  eprint        = {2004.09813},
  archivePrefix = {arXiv}
}""",
    },
    "tung2019": {
        "title": "Similarity-Preserving Knowledge Distillation (Tung & Mori, ICCV 2019)",
        "bibtex": """@inproceedings{tung2019similarity,
  title         = {Similarity-Preserving Knowledge Distillation},
  author        = {Tung, Frederick and Mori, Greg},
  booktitle     = {Proceedings of the IEEE/CVF International Conference on Computer Vision (ICCV)},
  year          = {2019},
  eprint        = {1907.09682},
  archivePrefix = {arXiv}
}""",
    },
    "lce": {
        "title": "Rethink Training of BERT Rerankers in Multi-Stage Retrieval Pipeline (Gao et al., ECIR 2021)",
        "bibtex": """@inproceedings{gao2021lce,
  title         = {Rethink Training of {BERT} Rerankers in Multi-Stage Retrieval Pipeline},
  author        = {Gao, Luyu and Dai, Zhuyun and Callan, Jamie},
  booktitle     = {Advances in Information Retrieval (ECIR 2021)},
  year          = {2021},
  eprint        = {2101.08751},
  archivePrefix = {arXiv}
}""",
    },
    "dpr": {
        "title": "Dense Passage Retrieval for Open-Domain Question Answering (Karpukhin et al., EMNLP 2020)",
        "bibtex": """@inproceedings{karpukhin2020dpr,
  title         = {Dense Passage Retrieval for Open-Domain Question Answering},
  author        = {Karpukhin, Vladimir and O{\\u{g}}uz, Barlas and Min, Sewon and Lewis, Patrick and Wu, Ledell and Edunov, Sergey and Chen, Danqi and Yih, Wen-tau},
  booktitle     = {Proceedings of the 2020 Conference on Empirical Methods in Natural Language Processing (EMNLP)},
  year          = {2020},
  eprint        = {2004.04906},
  archivePrefix = {arXiv}
}""",
    },
}


@dataclass(frozen=True)
class Method:
    """A distillation method the card can name: Hub tags, a one-line description, citations."""

    key: str
    name: str
    tags: tuple[str, ...]
    reference: str
    description: str
    citations: tuple[str, ...]


METHODS: dict[str, Method] = {
    method.key: method
    for method in (
        Method(
            "logit_kd", "Logit distillation", ("logit-distillation",), "Hinton et al., 2015, arXiv:1503.02531",
            "the student matches the teachers' temperature-softened predictions (KL, or MSE for one score).",
            ("hinton2015",),
        ),
        Method(
            "dvbert", "DvBERT teacher annealing", ("dvbert", "teacher-annealing"), "Cheng, SIGIR 2021, arXiv:2104.08675",
            "the weight lambda of the gold-label loss rises linearly from 0 to 1 over training while the teachers' "
            "soft loss gets 1 - lambda, so training starts from the teachers and ends on the labels.",
            ("dvbert",),
        ),
        Method(
            "tinybert", "TinyBERT layer distillation", ("tinybert",), "Chen et al., 2020, arXiv:2009.07531",
            "embedding, hidden-state and attention losses between mapped student and teacher layers, trained in "
            "one stage with the prediction losses (Simplified TinyBERT).",
            ("simplified_tinybert", "tinybert"),
        ),
        Method(
            "bert_emd", "BERT-EMD", ("bert-emd",), "Li et al., EMNLP 2020, arXiv:2010.06133",
            "many-to-many layer mapping: every student layer learns from every teacher layer, weighted by the "
            "Earth Mover's Distance flow, with layer weights re-estimated by cost attention after each step.",
            ("bert_emd",),
        ),
        Method(
            "virt", "VIRT", ("virt",), "Li et al., EMNLP 2022, arXiv:2112.04195",
            "the Siamese student's virtual X-to-Y attention maps are distilled from the cross-encoder's "
            "attention between the two texts; inference stays independent per text.",
            ("virt",),
        ),
        Method(
            "embedding_kd", "Embedding distillation", ("embedding-distillation", "sentence-embeddings"),
            "Reimers & Gurevych, EMNLP 2020, arXiv:2004.09813",
            "the Siamese student's sentence embeddings regress onto an embedding teacher's (MSE, through a learned "
            "projection when the widths differ); each model reads its own tokenization.",
            ("reimers2020",),
        ),
        Method(
            "similarity_kd", "Similarity-structure distillation", ("similarity-distillation",),
            "Tung & Mori, ICCV 2019, arXiv:1907.09682",
            "the student's in-batch cosine-similarity matrix matches an embedding teacher's (MSE, or row-wise KL "
            "at a temperature).",
            ("tung2019",),
        ),
        Method(
            "margin_mse", "Margin-MSE", ("margin-mse", "ranking-distillation"), "Hofstätter et al., 2020, arXiv:2010.02666",
            "over query groups, the student's score margin between a query's positive and each of its negatives "
            "matches the teacher's (scores precomputed once over every candidate).",
            ("hofstatter2020",),
        ),
        Method(
            "listwise_kl", "Listwise distillation", ("listwise-distillation", "ranking-distillation"),
            "Ren et al., EMNLP 2021, arXiv:2110.07367",
            "over query groups, the student's softmax over a query's passages matches the teacher's (KL at a "
            "temperature; RocketQAv2's listwise distillation with the teacher's scores precomputed).",
            ("rocketqav2",),
        ),
        Method(
            "group_contrastive", "Localised contrastive estimation", ("lce", "ranking"), "Gao et al., ECIR 2021, arXiv:2101.08751",
            "over query groups, the student picks each query's positive among its hard negatives (cross-entropy of "
            "the softmax over the group's scores): the gold labels beside Margin-MSE or listwise KL.",
            ("lce",),
        ),
        Method(
            "in_batch_negatives", "In-batch negatives", ("in-batch-negatives",), "Karpukhin et al., EMNLP 2020, arXiv:2004.04906",
            "a Siamese student's query embedding must pick its positive among every passage of the batch "
            "(cross-entropy over scaled cosines).",
            ("dpr",),
        ),
    )
}


def reference(key: str) -> str:
    """A one-line reference of a method key ("dvbert", "bert_emd", ...): its name, paper and citation titles."""
    method = METHODS[key]
    titles = "; ".join(CITATIONS[c]["title"] for c in method.citations)
    return f"{method.name}: {titles}. {method.reference}."
