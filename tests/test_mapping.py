"""Layer mappings against hand-written pair lists."""

import pytest

from hf_distill.mapping import ExplicitMapping, LastMapping, LayerMapping, UniformMapping, get_mapping


@pytest.mark.parametrize(
    "num_student, num_teacher, expected",
    [
        (4, 12, [(1, 3), (2, 6), (3, 9), (4, 12)]),  # TinyBERT 4L from BERT-base
        (2, 6, [(1, 3), (2, 6)]),
        (3, 6, [(1, 2), (2, 4), (3, 6)]),
        (4, 6, [(1, 1), (2, 3), (3, 4), (4, 6)]),  # not a multiple: floor, last stays on last
        (3, 3, [(1, 1), (2, 2), (3, 3)]),
        (1, 6, [(1, 6)]),
    ],
)
def test_uniform_mapping(num_student, num_teacher, expected):
    assert UniformMapping().pairs(num_student, num_teacher) == expected
    assert get_mapping("uniform").pairs(num_student, num_teacher) == expected


@pytest.mark.parametrize(
    "num_student, num_teacher, expected",
    [
        (2, 6, [(1, 5), (2, 6)]),
        (4, 12, [(1, 9), (2, 10), (3, 11), (4, 12)]),
        (3, 3, [(1, 1), (2, 2), (3, 3)]),
    ],
)
def test_last_mapping(num_student, num_teacher, expected):
    assert LastMapping().pairs(num_student, num_teacher) == expected
    assert get_mapping("last").pairs(num_student, num_teacher) == expected


def test_uniform_matches_the_layers_a_uniform_student_keeps():
    from hf_distill.modeling import select_layers

    for depth, keep in ((6, 2), (6, 3), (12, 4), (6, 4)):
        kept_one_based = [index + 1 for index in select_layers(depth, keep, "uniform")]
        assert [teacher for _, teacher in UniformMapping().pairs(keep, depth)] == kept_one_based


def test_explicit_mapping_and_many_to_one():
    mapping = get_mapping([(1, 2), (2, 4), (2, 6)])
    assert isinstance(mapping, ExplicitMapping)
    assert mapping.pairs(2, 6) == [(1, 2), (2, 4), (2, 6)]
    assert get_mapping([[1, 1]]).pairs(1, 1) == [(1, 1)]


def test_get_mapping_passes_instances_through():
    mapping = LastMapping()
    assert get_mapping(mapping) is mapping
    assert isinstance(get_mapping("uniform"), LayerMapping)


@pytest.mark.parametrize(
    "pairs, match",
    [
        ([(0, 1)], "out of range"),  # 0 is the embeddings
        ([(1, 0)], "out of range"),
        ([(3, 1)], r"student layers are 1\.\.2"),
        ([(1, 7)], r"teacher layers 1\.\.6"),
    ],
)
def test_explicit_mapping_out_of_range(pairs, match):
    with pytest.raises(ValueError, match=match):
        ExplicitMapping(pairs).pairs(2, 6)


@pytest.mark.parametrize("pairs", [[], [(1,)], [(1, 2, 3)], [(1.0, 2)], [("1", 2)], [1, 2], [(1, 2), (1, 2)]])
def test_explicit_mapping_rejects_malformed_pairs(pairs):
    with pytest.raises(ValueError):
        ExplicitMapping(pairs)


def test_get_mapping_unknown_name_names_value_and_choices():
    with pytest.raises(ValueError, match=r"mapping='skip' is not valid.*'uniform', 'last'"):
        get_mapping("skip")
    with pytest.raises(ValueError, match="mapping=3"):
        get_mapping(3)


@pytest.mark.parametrize("mapping", [UniformMapping(), LastMapping()])
def test_named_mappings_refuse_deeper_students_and_bad_depths(mapping):
    with pytest.raises(ValueError, match="no deeper than the teacher"):
        mapping.pairs(4, 2)
    with pytest.raises(ValueError, match="num_student_layers=0"):
        mapping.pairs(0, 6)
    with pytest.raises(ValueError, match="num_teacher_layers"):
        mapping.pairs(2, 2.5)
