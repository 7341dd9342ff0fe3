"""A Chinese question ranked against English passages through its English glosses
(lokal.glosses, CC-CEDICT): the development tasks ``d24_zh_read``, ``d32_zh_read`` and
the pair ``p12`` extracted a line at random from notes.txt before."""

from __future__ import annotations

import pytest

from helpers import DATA
from lokal import glosses
from lokal.glosses import chinese_topic, cjk_share, english_glosses, gloss_words, search_senses
from lokal.llm.evidence import Passage, rank_passages, text_passages
from lokal.llm.extract import choose_passage

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


@pytest.mark.parametrize(
    ("question", "topic"),
    [
        ("在工作区里找出提到团队出游的文件。", ["团队出游", "文件"]),  # z01_search
        ("在工作区中查找提到天气的文件。", ["天气", "文件"]),  # z04_search
        ("读取 docs/agent_intro.txt，记忆部分保存哪些内容？", ["记忆部分保存", "内容"]),
        ("什么？", []),  # nothing but asking
        ("What is the weather?", []),
    ],
)
def test_the_topic_of_a_chinese_question_leaves_out_the_words_that_ask(question, topic):
    assert chinese_topic(question) == topic


def test_glossing_the_topic_drops_what_asks_unless_nothing_is_left():
    question = "打开 docs/agent_guide.md，技能文件夹里有什么文件？"
    assert "open" in english_glosses(question) and "what" in english_glosses(question)
    topic = english_glosses(question, topic=True)
    assert "skill" in topic and "folder" in topic
    assert "open" not in topic and "what" not in topic
    assert "what" in english_glosses("什么？", topic=True)  # all of it asks: kept
    # a word's short senses, not those that explain it
    assert dict(gloss_words("代理"))["代理"] == ["surrogate", "proxy"]
    assert search_senses("团队出游") == [
        ("团队", ["team"]),
        ("出游", ["go on a tour", "have an outing"]),
    ]


INTRO, GUIDE = "docs/agent_intro.txt", "docs/agent_guide.md"


def _file_passages(name):
    text = (DATA / "workspace" / name).read_text(encoding="utf-8")
    return [Passage(t, "file_reader", name) for t in text_passages(text)]


@pytest.mark.parametrize(
    ("question", "name", "answer"),
    [
        # development tasks z05-z08: the guide is English; the intro holds three lines of
        # Chinese, so its Chinese question was ranked as written and matched 读取 ("read")
        # in "工具调用让模型能够读取本地文件"; the file name outweighed the question's Chinese
        ("读取 docs/agent_intro.txt，记忆部分保存哪些内容？", INTRO, "preferences"),
        ("读一下 docs/agent_intro.txt，循环会一直重复到什么时候？", INTRO, "final answer"),
        ("打开 docs/agent_guide.md，技能文件夹里有什么文件？", GUIDE, "SKILL.md"),
        ("打开 docs/agent_guide.md，文件应该怎么命名？", GUIDE, "relative"),
        # z09: 代理's explaining senses ("act on behalf of sb in a responsible position")
        # outweighed "tool": the guide's first line came first
        ("打开 docs/agent_guide.md，代理能调用哪些工具？", GUIDE, "calculator"),
        ("读取 docs/agent_intro.txt，Agent 系统由哪几部分组成？", INTRO, "Memory"),  # z10
    ],
)
def test_a_chinese_question_about_a_mostly_english_file_finds_its_line(question, name, answer):
    assert answer in choose_passage(question, _file_passages(name)).passage.text


def test_english_text_never_reads_the_dictionary(monkeypatch):
    # a search query or question in English asks for no topic: the dictionary (2 s and
    # 140 MB on first read) stays unread
    def unread():
        raise AssertionError("the dictionary was read for English text")

    monkeypatch.setattr(glosses, "_dictionary", unread)
    assert chinese_topic("Which file mentions the team outing?") == []
    assert search_senses("walrus") == []
    assert english_glosses("When is the review?", topic=True) == "When is the review?"
