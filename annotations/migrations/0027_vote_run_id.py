from django.db import migrations, models


def drop_run_foreign_key(apps, schema_editor):
    """A database whose 0002 ran before it was rewritten has a foreign key from a vote's run_id
    to judges.JudgeRun: it goes (the column, its values and its index stay). A database made
    since has none, and nothing happens."""
    Vote = apps.get_model("annotations", "Vote")
    table, connection = Vote._meta.db_table, schema_editor.connection
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
    names = [name for name, c in constraints.items() if c["foreign_key"] and c["columns"] == ["run_id"]]
    if not names:
        return
    if connection.vendor != "sqlite":
        for name in names:
            schema_editor.execute(
                f"ALTER TABLE {schema_editor.quote_name(table)} DROP CONSTRAINT {schema_editor.quote_name(name)}"
            )
        return
    # SQLite drops a foreign key only by making the table again, which altering a field does
    # (from the model as this migration knows it: no foreign key). The field as it was, as far
    # as the alteration needs to know: the same column, not yet indexed by Django's account.
    new = Vote._meta.get_field("run_id")
    old = models.BigIntegerField(null=True, blank=True)
    old.set_attributes_from_name("run_id")
    old.model = Vote
    schema_editor.alter_field(Vote, old, new)


class Migration(migrations.Migration):
    # A vote names its judge run by id, a plain indexed integer the judges app interprets
    # (JudgeRun.votes), no longer a foreign key to judges.JudgeRun (0002, rewritten): the core
    # app's models and migrations need no other app.
    dependencies = [
        ("annotations", "0026_answer_context"),
    ]

    operations = [migrations.RunPython(drop_run_foreign_key, migrations.RunPython.noop)]
