from django.db import migrations, models


def measure_spaces(apps, schema_editor):
    """Every answer's ``text.split(" ")`` pieces; unknown (null) for an answer imported with its
    lengths instead of its text (no text, yet words counted)."""
    Answer = apps.get_model("annotations", "Answer")
    batch = []
    for answer in Answer.objects.only("id", "text", "len_words").order_by("id").iterator(chunk_size=2000):
        if answer.text or not answer.len_words:
            answer.len_spaces = len(answer.text.split(" "))
            batch.append(answer)
        if len(batch) >= 2000:
            Answer.objects.bulk_update(batch, ["len_spaces"])
            batch = []
    Answer.objects.bulk_update(batch, ["len_spaces"])


class Migration(migrations.Migration):
    dependencies = [
        ("annotations", "0022_markdown_validators"),
    ]

    operations = [
        migrations.AddField(
            model_name="answer",
            name="len_spaces",
            field=models.PositiveIntegerField(blank=True, editable=False, null=True),
        ),
        migrations.RunPython(measure_spaces, migrations.RunPython.noop),
    ]
