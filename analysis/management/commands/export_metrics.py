"""python manage.py export_metrics --study S -o FILE: the metrics CSV (see analysis.exports)."""

from analysis.management.commands._common import ExportCommand


class Command(ExportCommand):
    help = "Export a study's metrics as CSV, streamed."
    export = "metrics"
