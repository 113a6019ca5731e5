import os
from importlib import import_module

from django.conf import settings
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "biasstudy.settings")

application = get_wsgi_application()

# Import the URLconf, and with it every view, now rather than on the first request: it pulls in the
# dashboard's plotting (0.7 s of CPU), which the first rater a new gunicorn worker served waited
# for. With `preload_app` (gunicorn.conf.py) this happens once, in the master.
import_module(settings.ROOT_URLCONF)
