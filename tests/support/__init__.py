"""What the tests share beside conftest.py: servers, engines' clusters, helper processes."""
