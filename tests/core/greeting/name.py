"""The greeting rule's name, written only here."""

RULE = "greeting"
