"""The transaction coordinator: transactional ids in `__transaction_state`, markers, and the
leaders' checks."""
