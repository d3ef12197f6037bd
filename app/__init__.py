"""cpdecomp's Streamlit dashboard: `streamlit run app/main.py` (see README, "The dashboard")."""
