"""Published models: the cache they live in, downloads into it, archives unpacked safely."""
