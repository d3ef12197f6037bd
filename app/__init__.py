"""cpdecomp's Streamlit dashboard: `streamlit run app/main.py` (see docs/analyst/dashboard.md)."""
