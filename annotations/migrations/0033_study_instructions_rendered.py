from django.db import migrations, models

from biasstudy import rendering


def store_instructions_renders(apps, schema_editor):
    """Store the render of every study's instructions (what Study.refresh_instructions_html
    does on save), so the task page does not render them on every view. Few rows: one update
    each, by queryset so that save() and its data version are not involved."""
    Study = apps.get_model("annotations", "Study")
    for pk, text in Study.objects.values_list("pk", "instructions"):
        Study.objects.filter(pk=pk).update(
            instructions_html=str(rendering.render_markdown(text)), instructions_html_key=rendering.render_key(text)
        )


class Migration(migrations.Migration):
    dependencies = [
        ("annotations", "0032_request_count"),
    ]

    operations = [
        migrations.AddField(
            model_name="study",
            name="instructions_html",
            field=models.TextField(blank=True, default="", editable=False),
        ),
        migrations.AddField(
            model_name="study",
            name="instructions_html_key",
            field=models.CharField(blank=True, default="", editable=False, max_length=40),
        ),
        migrations.RunPython(store_instructions_renders, migrations.RunPython.noop),
    ]
