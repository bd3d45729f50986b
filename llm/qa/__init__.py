"""Stock-R1 QA benchmark data: five task families grounded at a decision time t (§4.1, App. A.4)."""

from llm.qa.answers import extract_answer, grade_completion, is_correct, normalize_answer
from llm.qa.baselines import MajorityBaseline, accuracy_by_family, random_walk_answer
from llm.qa.core import FAMILIES, FAMILY_TITLES, Decision, NewsItem, Path, QAContext, QAItem
from llm.qa.dataset import load_items, save_items
from llm.qa.families import TEMPLATES, TEMPLATES_BY_KEY, Template
from llm.qa.generator import QAConfig, QAGenerator, QAReport, generate_qa
from llm.qa.question_only import QuestionOnlyClassifier, QuestionOnlyLookup

__all__ = [
    "FAMILIES", "FAMILY_TITLES", "TEMPLATES", "TEMPLATES_BY_KEY", "Decision", "MajorityBaseline",
    "NewsItem", "Path", "QAConfig", "QAContext", "QAGenerator", "QAItem", "QAReport", "QuestionOnlyClassifier",
    "QuestionOnlyLookup", "Template",
    "accuracy_by_family", "extract_answer", "generate_qa", "grade_completion", "is_correct",
    "load_items", "normalize_answer", "random_walk_answer", "save_items",
]
