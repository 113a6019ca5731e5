"""The API's JSON parser: DRF's, with the bounds a study file has (annotations.study_files).

DRF's JSONParser already refuses NaN and Infinity; this one also refuses, with a 400, bodies
nested so deeply that parsing them exhausts the recursion limit (a RecursionError, else a 500),
bodies nested deeper than study_files.MAX_DEPTH, and numbers Python reads as infinite (1e400) or
that no column holds.
"""

from __future__ import annotations

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from annotations.study_files import first_unstorable


class BoundedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply.") from None
        problem = first_unstorable(data)
        if problem is not None:
            where, why = problem
            raise ParseError(f"JSON parse error - {where or 'the body'}: {why}.")
        return data
