from django.db import migrations


def forget_logged_keys(apps, schema_editor):
    """The admin's log names each object by its str, which for DRF's token is the key: entries
    written by DRF's token admin held keys, shown under "Recent actions": they no longer do."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    LogEntry = apps.get_model("admin", "LogEntry")
    token_types = ContentType.objects.filter(app_label="authtoken")
    LogEntry.objects.filter(content_type__in=token_types).update(object_repr="API key (not shown)")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("admin", "0003_logentry_add_action_flag_choices"),
        ("authtoken", "0004_alter_tokenproxy_options"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.CreateModel(
            name="ApiKey",
            fields=[],
            options={
                "verbose_name": "API key",
                "verbose_name_plural": "API keys",
                "proxy": True,
                "indexes": [],
                "constraints": [],
            },
            bases=("authtoken.tokenproxy",),
        ),
        migrations.RunPython(forget_logged_keys, migrations.RunPython.noop, elidable=True),
    ]
