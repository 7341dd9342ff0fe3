"""A Chinese question ranked against English passages through its English glosses
(lokal.llm.glosses, CC-CEDICT): the development tasks ``d24_zh_read``, ``d32_zh_read`` and
the pair ``p12`` extracted a line at random from notes.txt before."""

from __future__ import annotations

import pytest

from lokal.llm import glosses
from lokal.llm.evidence import Passage, rank_passages, text_passages
from lokal.llm.extract import choose_passage
from lokal.llm.glosses import cjk_share, english_glosses, gloss_words

NOTES_TEXT = """Notes

- Quarterly review is on Friday at 10:00.
- The sales table lives in data/sales.csv (20 rows: region, product, units, price).
- Remember to check the weather before planning the team outing.
"""


def notes_passages():
    return [Passage(text, "file_reader", "notes.txt") for text in text_passages(NOTES_TEXT)]


def test_words_are_looked_up_whole_before_their_characters():
    words = dict(gloss_words("季度评审在星期几"))
    assert "quarter of a year" in words["季度"]
    assert words["星期几"] == ["which day of the week"]
    assert words["在"] == []  # a grammatical word adds nothing
    # the common reading first: 告诉 "to tell", not its legal reading "to press charges"
    assert dict(gloss_words("告诉"))["告诉"][0] == "tell"


def test_text_outside_chinese_is_kept_and_english_is_untouched():
    glossed = english_glosses("打开 notes.txt，季度评审在星期几？")
    assert "notes.txt" in glossed and "quarter of a year" in glossed
    assert not any("\u4e00" <= c <= "\u9fff" for c in glossed)
    assert english_glosses("When is the review?") == "When is the review?"
    assert cjk_share("打开 notes.txt") == pytest.approx(2 / 10)


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("打开 notes.txt，团队出游前要检查什么？", "weather"),  # d24_zh_read
        ("打开 notes.txt，团队外出之前要检查什么？", "weather"),  # d32_zh_read
        ("读一下 notes.txt，季度评审是星期几？", "Friday"),  # p12a
        ("notes.txt 里写的季度评审在哪一天？", "Friday"),  # p12b
        ("请读取 notes.txt，告诉我销售表在哪里。", "sales.csv"),  # zh_read
    ],
)
def test_a_chinese_question_finds_the_english_line_that_answers_it(question, answer):
    assert answer in choose_passage(question, notes_passages()).passage.text


def test_without_the_dictionary_the_question_is_ranked_as_written(monkeypatch):
    monkeypatch.setattr(glosses, "_dictionary", lambda: None)
    assert english_glosses("季度评审在星期几？") == "季度评审在星期几？"
    assert gloss_words("季度") == []
    assert rank_passages("季度评审在星期几？", notes_passages(), k=1)  # still ranks
