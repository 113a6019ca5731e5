"""No admin form is built with a default that Django 6 changes: about 40 RemovedInDjango60Warnings
came from the admin's forms (a URL field without `assume_scheme`, whose default scheme becomes
https), one each time a study's or an LLM judge's page was shown."""

import warnings

from django.apps import apps
from django.contrib import admin
from django.test import RequestFactory
from django.utils.deprecation import RemovedInDjango60Warning

from tests.factories import make_user


def test_every_admin_form_is_built_without_a_django_6_deprecation(db):
    request = RequestFactory().get("/admin/")
    request.user = make_user(is_staff=True, is_superuser=True)
    built = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for model in apps.get_models():
            if admin.site.is_registered(model):
                admin.site.get_model_admin(model).get_form(request)
                built.append(model.__name__)
    assert {"Study", "LLMJudge"} <= set(built)
    deprecated = [f"{w.filename}:{w.lineno}: {w.message}" for w in caught if w.category is RemovedInDjango60Warning]
    assert not deprecated, deprecated
