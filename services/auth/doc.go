// Package auth decides who the caller is: shopper and merchant accounts (bcrypt passwords,
// bounded), the HS256 session tokens and their verified-token cache, and the logouts every
// instance honours.
package auth
