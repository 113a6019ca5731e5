from importlib import import_module

from django.db import migrations

# The same refresh as 0016, for the next change of RENDERING_FINGERPRINT: bare URLs are linked
# only with http, https or mailto (an ftp:// or ssh:// URL in an answer was a link before).
refresh_stale_renders = import_module("annotations.migrations.0016_refresh_stored_renders").refresh_stale_renders


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("annotations", "0016_refresh_stored_renders"),
    ]

    operations = [migrations.RunPython(refresh_stale_renders, migrations.RunPython.noop, elidable=True)]
