from django.db import migrations

from biasstudy import rendering

BATCH = 500


def refresh_stale_renders(apps, schema_editor):
    """Store the render of every question and answer whose stored one no longer matches the
    rendering code (RENDERING_FINGERPRINT changed: links are now found in the cleaning parse).
    Without this, pages would render those texts again on every view. Not atomic: each batch is
    rendered outside any transaction and written in its own short one, so raters are not locked
    out of a SQLite database meanwhile. A text changed after it was read here keeps a key that
    does not match it, and is rendered afresh when shown (RenderedText.html), never stale."""
    for name in ("Question", "Answer"):
        model = apps.get_model("annotations", name)
        rows = model.objects.only("pk", "text", "text_html_key").order_by("pk")
        stale = [row for row in rows.iterator(chunk_size=2000) if row.text_html_key != rendering.render_key(row.text)]
        for start in range(0, len(stale), BATCH):
            batch = stale[start : start + BATCH]
            for row in batch:
                row.text_html = str(rendering.render_markdown(row.text))
                row.text_html_key = rendering.render_key(row.text)
            model.objects.bulk_update(batch, ["text_html", "text_html_key"])


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("annotations", "0015_study_allow_mturk_frame"),
    ]

    operations = [migrations.RunPython(refresh_stale_renders, migrations.RunPython.noop, elidable=True)]
