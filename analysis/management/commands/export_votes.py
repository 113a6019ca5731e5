"""python manage.py export_votes --study S -o FILE: the votes CSV (see analysis.exports)."""

from analysis.management.commands._common import ExportCommand


class Command(ExportCommand):
    help = "Export a study's votes as CSV, streamed."
    export = "votes"
    takes_filters = False  # every vote, with full provenance; filters are for analysis
