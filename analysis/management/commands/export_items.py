"""python manage.py export_items --study S -o FILE: the items CSV (see analysis.exports)."""

from analysis.management.commands._common import ExportCommand


class Command(ExportCommand):
    help = "Export a study's items as CSV, streamed."
    export = "items"
